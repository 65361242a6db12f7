//! The claim under limits: a key at its limit never blocks the rows behind
//! it, and a rate window moves a row's due time without spending an attempt.

use std::time::Duration;

use pgbus_runtime::{FlowControl, Rate, StepStatus, Workflow};

use super::{Free, Job, Steps, claim, held_by, job_key, limited, register, runs_of, start};
use crate::pg::{TestDb, at_ms, t0};

limited!(
    KeyedOne(Steps),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    },
    key: job_key,
);

limited!(
    Rated(Steps),
    flow: FlowControl {
        rate_limit: Some(Rate {
            count: 3,
            period_ms: 1_000,
        }),
        ..FlowControl::NONE
    },
    key: |_| None,
);

/// `hot` runs of key `hot` started first (at the head of the queue), then
/// `others` runs of other keys and one run of an unlimited workflow.
async fn a_hot_key_ahead(
    t: &TestDb,
    hot: usize,
    others: usize,
) -> (Vec<pgbus_runtime::RunId>, Vec<pgbus_runtime::RunId>) {
    let client = t.client();
    let hot_runs = client
        .start_many::<KeyedOne>(
            (0..hot).map(|_| (Job::new("hot"), pgbus_runtime::StartOptions::new())),
        )
        .await
        .expect("hot starts")
        .into_iter()
        .map(|s| s.run_id)
        .collect();
    let mut behind = Vec::new();
    for i in 0..others {
        behind.push(start::<KeyedOne>(t, &format!("cold-{i}")).await);
    }
    behind.push(start::<Free>(t, "free").await);
    (hot_runs, behind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_its_limit_does_not_stop_the_rows_behind_it_in_the_same_claim() {
    let t = TestDb::new().await;
    let store = t.db.store();
    let defs = [KeyedOne::DEFINITION, Free::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    let (hot, behind) = a_hot_key_ahead(&t, 50, 3).await;

    // The key's one slot goes to its oldest run.
    let first = claim(&store, "w1", &defs, 1).await;
    assert_eq!(runs_of(&first), [hot[0]]);

    // 49 rows of the key at its limit ahead of the others: one claim passes
    // over all of them, holds them back, and takes the rows behind.
    let claimed = claim(&store, "w1", &defs, 4).await;
    let mut got = runs_of(&claimed);
    got.sort_unstable();
    assert_eq!(got, behind);
    for run in &hot[1..] {
        assert_eq!(
            held_by(&t, *run).await.as_deref(),
            Some("key:flow.steps:hot")
        );
    }
    // Held rows are out of the claim's way (and of the next due time: see
    // the store's unit tests).
    assert!(claim(&store, "w1", &defs, 4).await.is_empty());

    // The slot given back wakes the key's oldest held row, and the claim takes it.
    super::end(
        &store,
        KeyedOne::DEFINITION,
        &first[0],
        "w1",
        pgbus_runtime::engine::Verb::Complete,
    )
    .await;
    assert_eq!(held_by(&t, hot[1]).await, None);
    assert_eq!(
        held_by(&t, hot[2]).await.as_deref(),
        Some("key:flow.steps:hot")
    );
    let next = claim(&store, "w1", &defs, 4).await;
    let mut got = runs_of(&next);
    got.sort_unstable();
    // The first run's next step (its own key) is at the limit again behind
    // the woken row, which is older.
    assert_eq!(got, [hot[1]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_held_rows_than_one_look_ahead_are_passed_over_in_one_claim() {
    let t = TestDb::new().await;
    let store = t.db.store();
    let defs = [KeyedOne::DEFINITION, Free::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    let (hot, behind) = a_hot_key_ahead(&t, 300, 2).await;
    let first = claim(&store, "w1", &defs, 1).await;
    assert_eq!(runs_of(&first), [hot[0]]);

    // 299 rows ahead, three times the look-ahead of one round: the claim's
    // rounds pass over them all.
    let claimed = claim(&store, "w1", &defs, 2).await;
    let mut got = runs_of(&claimed);
    got.sort_unstable();
    assert_eq!(got, behind[..2]);
    let held = t
        .count(
            "SELECT count(*) FROM {schema}.steps WHERE held_by = 'key:flow.steps:hot'",
            &[],
        )
        .await;
    assert_eq!(held, 299);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_outside_its_rate_window_waits_for_the_window_with_its_attempt_unchanged() {
    let t = TestDb::new().await;
    let store = t.db.store();
    let defs = [Rated::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    let mut runs = Vec::new();
    for i in 0..5 {
        runs.push(start::<Rated>(&t, &format!("r{i}")).await);
    }

    // Three starts in the window; the next two wait for it to open again.
    let claimed = claim(&store, "w1", &defs, 10).await;
    assert_eq!(runs_of(&claimed), runs[..3]);
    for run in &runs[3..] {
        let view = t.run(*run).await;
        let row = &view.steps[0];
        assert_eq!(row.status, StepStatus::Scheduled);
        assert_eq!(row.attempt, 1);
        assert_eq!(row.throttled_by.as_deref(), Some("workflow:flow.steps"));
        assert_eq!(row.held_by, None);
        assert_eq!(row.scheduled_at, at_ms(1_000));
        assert_eq!(
            view.events.len(),
            1,
            "no event, no attempt spent: {:?}",
            view.events
        );
    }
    assert!(claim(&store, "w1", &defs, 10).await.is_empty());

    // Just before the window opens: nothing; at its opening: both start.
    t.clock.advance(Duration::from_millis(999));
    assert!(claim(&store, "w1", &defs, 10).await.is_empty());
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(t.clock.now(), at_ms(1_000));
    let later = claim(&store, "w1", &defs, 10).await;
    assert_eq!(runs_of(&later), runs[3..]);
    for c in &later {
        assert_eq!(c.attempt, 1);
        assert_eq!(c.claimed_at, at_ms(1_000));
    }
    let view = t.run(runs[3]).await;
    assert_eq!(
        view.steps[0].throttled_by, None,
        "a claimed row is no longer throttled"
    );
    assert!(view.steps[0].scheduled_at > t0());
}

limited!(
    RatedFree(Free),
    flow: FlowControl {
        rate_limit: Some(Rate {
            count: 1,
            period_ms: 60_000,
        }),
        ..FlowControl::NONE
    },
    key: |_| None,
);

/// A counter as `(name, labels sorted, value)`.
type Counted = (String, Vec<(String, String)>, u64);

#[tokio::test(flavor = "current_thread")]
async fn rows_held_back_or_throttled_are_counted_by_workflow_and_scope() {
    use metrics_util::MetricKind;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let t = TestDb::new().await;
    let store = t.db.store();
    let defs = [KeyedOne::DEFINITION, RatedFree::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    for _ in 0..3 {
        start::<KeyedOne>(&t, "same").await;
        start::<RatedFree>(&t, "any").await;
    }
    assert_eq!(claim(&store, "w1", &defs, 10).await.len(), 2);

    let counted: Vec<Counted> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.kind() == MetricKind::Counter)
        .filter_map(|(key, _, _, value)| {
            let DebugValue::Counter(n) = value else {
                return None;
            };
            let mut labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            Some((key.key().name().to_owned(), labels, n))
        })
        .collect();
    let labels = |workflow: &str, scope: &str| {
        vec![
            ("scope".to_owned(), scope.to_owned()),
            ("workflow".to_owned(), workflow.to_owned()),
        ]
    };
    assert!(
        counted.contains(&(
            "pgbus_steps_held_total".to_owned(),
            labels("flow.steps", "key"),
            2
        )),
        "{counted:?}"
    );
    assert!(
        counted.contains(&(
            "pgbus_steps_throttled_total".to_owned(),
            labels("flow.free", "workflow"),
            2
        )),
        "{counted:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_registered_between_two_claims_applies_to_the_second() {
    let t = TestDb::new().await;
    let store = t.db.store();
    // No limit yet: the store claims as it did before flow control.
    register(&t, "w1", &[Steps::DEFINITION], &[]).await;
    let first = start::<KeyedOne>(&t, "k").await;
    assert_eq!(
        runs_of(&claim(&store, "w1", &[Steps::DEFINITION], 4).await),
        [first]
    );

    // Another deploy registers a per-key limit: the same store's next claim
    // admits under it (the first run's step holds no slot: it was claimed
    // without one, so one more of the key is admitted, and no more).
    register(&t, "w2", &[KeyedOne::DEFINITION], &[]).await;
    let more = [
        start::<KeyedOne>(&t, "k").await,
        start::<KeyedOne>(&t, "k").await,
    ];
    assert_eq!(
        runs_of(&claim(&store, "w1", &[Steps::DEFINITION], 4).await),
        [more[0]]
    );
    assert_eq!(
        held_by(&t, more[1]).await.as_deref(),
        Some("key:flow.steps:k")
    );

    // The limit gone, the store claims without one again.
    register(&t, "w2", &[Steps::DEFINITION], &[]).await;
    assert_eq!(
        runs_of(&claim(&store, "w1", &[Steps::DEFINITION], 4).await),
        [more[1]]
    );
}
