//! The outcome path against the real server, where the worker's public API cannot
//! reach: an outcome retried after its first try committed with the reply lost.
//! The handoff of an outcome's next step to its worker is tested in `handoff`.

mod group;
mod group_edges;
mod handoff;

use super::*;
use crate::engine::{AttemptResult, RunStatus, Verb};
use crate::prelude::*;
use crate::store::{Claim, Ended, Handoff, Registered};
use crate::{Clock, Database, ManualClock, Schema};

struct Once;

#[workflow(name = "store.once")]
impl Once {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn then(&self, _cx: &mut StepCx<()>) {}
}

async fn database() -> Database {
    let url = std::env::var("PGBUS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned());
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let clock = Clock::Manual(ManualClock::new(
        chrono::DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid time"),
    ));
    let db = Database::connect_with(&url, Schema::new(&name).expect("valid"), clock)
        .await
        .expect("connect");
    db.migrate().await.expect("migrate");
    db
}

async fn drop_schema(db: &Database) {
    db.pool()
        .get()
        .await
        .expect("connection")
        .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", db.schema()))
        .await
        .expect("drop the test schema");
}

async fn late_events(store: &PgStore, run: RunId) -> i64 {
    let client = store.pool.get().await.expect("connection");
    client
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".events WHERE run_id = $1 AND event = 'late_completion_ignored'",
                store.schema
            ),
            &[&run.0],
        )
        .await
        .expect("count")
        .get(0)
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario after another on one schema
async fn a_retried_outcome_whose_first_try_committed_is_not_a_late_completion() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let ok = AttemptResult::ok(Verb::Complete, None);

    // Recorded, then the same outcome again as a retry: applied, no late event,
    // and the run advanced once.
    let run = client.start::<Once>(&()).await.expect("start").run_id;
    let claim = store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    let first = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, false, None)
        .await
        .expect("end");
    assert!(matches!(first, Ended::Applied(_)));
    let again = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, true, None)
        .await
        .expect("end");
    assert!(matches!(again, Ended::Applied(_)), "its own earlier commit");
    assert_eq!(late_events(store, run).await, 0);
    assert_eq!(client.run(run).await.expect("run").steps.len(), 2);

    // Not a retry: the same call is a late completion.
    let late = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, false, None)
        .await
        .expect("end");
    assert!(matches!(late, Ended::Late));
    assert_eq!(late_events(store, run).await, 1);

    // A retry whose first try did not commit, and an operator cancelled the run
    // meanwhile: a late completion, not the worker's own change.
    client
        .cancel(run, "ops", "done here")
        .await
        .expect("cancel");
    let other = client.start::<Once>(&()).await.expect("start").run_id;
    let claim = store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(claim.run_id, other);
    client.cancel(other, "ops", "stop").await.expect("cancel");
    let cancelled = AttemptResult::ok(
        Verb::Cancel {
            reason: "stop".to_owned(),
        },
        None,
    );
    let retried = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &cancelled, true, None)
        .await
        .expect("end");
    assert!(matches!(retried, Ended::Late));
    assert_eq!(late_events(store, other).await, 1);

    // A retry of an attempt the sweep took over, after this same worker
    // completed the reattempt: its events are about the other attempt, so the
    // retry is a late completion, not "already recorded".
    let third = client.start::<Once>(&()).await.expect("start").run_id;
    let first_try = store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(first_try.run_id, third);
    let stalled = crate::engine::stalled_result(
        crate::engine::StallAction::reattempt(std::time::Duration::ZERO),
        true,
        "only",
        1,
        0,
        "worker_lost",
    );
    let swept = store
        .sweep_attempt(Once::DEFINITION, &first_try, "w1", &stalled, "worker_lost")
        .await
        .expect("sweep");
    assert!(matches!(swept, Ended::Applied(_)));
    let second_try = store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!((second_try.run_id, second_try.attempt), (third, 2));
    let done = store
        .end_attempt(Once::DEFINITION, &second_try, "w1", &ok, false, None)
        .await
        .expect("end");
    assert!(matches!(done, Ended::Applied(_)));
    let stale = store
        .end_attempt(Once::DEFINITION, &first_try, "w1", &ok, true, None)
        .await
        .expect("end");
    assert!(matches!(stale, Ended::Late), "not its own earlier commit");
    assert_eq!(late_events(store, third).await, 1);

    drop_schema(&db).await;
}

/// Sets the first step row of `run` to `queue`, `priority` and a due time
/// `offset_s` seconds from the pinned clock.
async fn place(db: &Database, run: RunId, queue: &str, priority: i16, offset_s: i64) {
    let client = db.pool().get().await.expect("connection");
    let moved = client
        .execute(
            &format!(
                "UPDATE \"{}\".steps SET queue = $2, priority = $3,
                     scheduled_at = to_timestamp(1900000000) + $4::bigint * interval '1 second'
                 WHERE run_id = $1",
                db.schema()
            ),
            &[&run.0, &queue, &priority, &offset_s],
        )
        .await
        .expect("place the step");
    assert_eq!(moved, 1);
}

#[tokio::test]
async fn claims_and_the_next_due_time_follow_queue_priority_and_time_not_held_runs() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let workflows = Registered::of([Once::DEFINITION]);
    let both = ["a".to_owned(), "b".to_owned()];
    let mut runs = Vec::new();
    for _ in 0..5 {
        runs.push(client.start::<Once>(&()).await.expect("start").run_id);
    }
    // Queue a: priority 0 in 10 s, priority 5 in 3 s, priority 0 due a second
    // ago but its run paused (a held step). Queue b: priority 2 in 7 s.
    place(&db, runs[0], "a", 0, 10).await;
    place(&db, runs[1], "a", 5, 3).await;
    place(&db, runs[2], "a", 0, -1).await;
    client.pause(runs[2], "ops", "hold").await.expect("pause");
    place(&db, runs[3], "b", 2, 7).await;
    place(&db, runs[4], "elsewhere", 0, -60).await;

    assert_eq!(
        store.next_due_ms(&both, &workflows).await.expect("next"),
        Some(3_000)
    );
    assert_eq!(
        store
            .next_due_ms(&["b".to_owned()], &workflows)
            .await
            .expect("next"),
        Some(7_000)
    );
    assert_eq!(
        store
            .next_due_ms(&["none".to_owned()], &workflows)
            .await
            .expect("next"),
        None
    );
    assert!(
        store
            .claim(&both, &workflows, 5, "w1", 60_000)
            .await
            .expect("claim")
            .is_empty(),
        "nothing is due yet, and the held step is not claimable"
    );

    // Everything due: lowest priority number first across both queues, then
    // the earlier time; a queue named twice is claimed from once.
    place(&db, runs[0], "a", 0, -1).await;
    place(&db, runs[1], "a", 5, -30).await;
    place(&db, runs[3], "b", 2, -20).await;
    let twice = ["a".to_owned(), "b".to_owned(), "a".to_owned()];
    let first = store
        .claim(&twice, &workflows, 2, "w1", 60_000)
        .await
        .expect("claim");
    let order: Vec<RunId> = first.iter().map(|c| c.run_id).collect();
    assert_eq!(order, [runs[0], runs[3]]);
    let rest = store
        .claim(&twice, &workflows, 5, "w1", 60_000)
        .await
        .expect("claim");
    let order: Vec<RunId> = rest.iter().map(|c| c.run_id).collect();
    assert_eq!(order, [runs[1]], "the paused run's step stays held");
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_row_a_limit_holds_back_is_neither_claimed_nor_the_next_due_time() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let workflows = Registered::of([Once::DEFINITION]);
    let queues = ["a".to_owned()];
    let held = client.start::<Once>(&()).await.expect("start").run_id;
    let later = client.start::<Once>(&()).await.expect("start").run_id;
    // Held back a minute ago (a release wakes it); the other due in 5 s.
    place(&db, held, "a", 0, -60).await;
    place(&db, later, "a", 0, 5).await;
    let pool = db.pool().get().await.expect("connection");
    pool.execute(
        &format!(
            "UPDATE \"{}\".steps SET held_by = 'key:store.once:k' WHERE run_id = $1",
            db.schema()
        ),
        &[&held.0],
    )
    .await
    .expect("hold the row");

    // The next due time is the other row's: a worker sleeps, it does not spin.
    assert_eq!(
        store.next_due_ms(&queues, &workflows).await.expect("next"),
        Some(5_000)
    );
    assert!(
        store
            .claim(&queues, &workflows, 5, "w1", 60_000)
            .await
            .expect("claim")
            .is_empty()
    );
    // Woken (as a release does), it is due again.
    pool.execute(
        &format!(
            "UPDATE \"{}\".steps SET held_by = NULL WHERE run_id = $1",
            db.schema()
        ),
        &[&held.0],
    )
    .await
    .expect("wake the row");
    assert_eq!(
        store.next_due_ms(&queues, &workflows).await.expect("next"),
        Some(-60_000)
    );
    let claimed = store
        .claim(&queues, &workflows, 5, "w1", 60_000)
        .await
        .expect("claim");
    assert_eq!(claimed.iter().map(|c| c.run_id).collect::<Vec<_>>(), [held]);
    drop_schema(&db).await;
}
