//! Start options and bulk starts at their edges, on Postgres (a review of
//! issue 20): a full bulk call whose keys repeat at odd positions, are held
//! by a run of the same workflow or of another; start times and delays at
//! and past their bounds; queue names and priorities at their extremes; a
//! start in a transaction that rolls back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, MAX_STARTS_PER_CALL, StartOptions};

use crate::pg::{TestDb, t0};
use crate::start_in_pg::own_connection;

struct Label;

#[workflow(name = "edges.label", input = u32)]
impl Label {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

struct Other;

#[workflow(name = "edges.other", input = u32)]
impl Other {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

fn option_of(error: &Error) -> &'static str {
    match error {
        Error::InvalidStartOption { option, .. } => option,
        other => panic!("an invalid option, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bulk_call_maps_keys_at_odd_positions_back_in_order() {
    let t = TestDb::new().await;
    let client = t.client();
    let held = client
        .start_idempotent::<Label>(&0, "held")
        .await
        .expect("a start")
        .run_id;
    let elsewhere = client
        .start_idempotent::<Other>(&0, "elsewhere")
        .await
        .expect("a start")
        .run_id;
    let last = MAX_STARTS_PER_CALL - 1;
    let key_at = |i: usize| -> Option<String> {
        match i {
            0 | 999 => Some("first".to_owned()),
            1 | 998 => Some("tail".to_owned()),
            500 => Some("held".to_owned()),
            501 => Some("elsewhere".to_owned()),
            i if i % 7 == 3 => Some(format!("k{i}")),
            _ => None,
        }
    };
    let starts = (0..MAX_STARTS_PER_CALL).map(|i| {
        let options = key_at(i).map_or_else(StartOptions::new, |k| StartOptions::new().key(k));
        (u32::try_from(i).expect("small"), options)
    });
    let started = client
        .start_many::<Label>(starts)
        .await
        .expect("a full call");
    assert_eq!(started.len(), MAX_STARTS_PER_CALL);
    assert_eq!(started[last].run_id, started[0].run_id);
    assert!(started[0].created && !started[last].created);
    assert_eq!(started[998].run_id, started[1].run_id);
    assert!(started[1].created && !started[998].created);
    assert_eq!(started[500].run_id, held);
    assert!(!started[500].created);
    assert_ne!(started[501].run_id, elsewhere, "keys are per workflow");
    assert!(started[501].created);
    let created = started.iter().filter(|s| s.created).count();
    assert_eq!(created, MAX_STARTS_PER_CALL - 3);
    // Each created run holds the input of the start that made it.
    for (i, s) in started.iter().enumerate().filter(|(_, s)| s.created) {
        let input: i64 = t
            .count(
                "SELECT (input #>> '{}')::bigint FROM {schema}.runs WHERE id = $1",
                &[&s.run_id.0],
            )
            .await;
        assert_eq!(input, i64::try_from(i).expect("small"), "start {i}");
    }
    let runs = t
        .count(
            "SELECT count(*) FROM {schema}.runs WHERE workflow = 'edges.label'",
            &[],
        )
        .await;
    assert_eq!(runs, i64::try_from(created + 1).expect("small"));
    let over = client
        .start_many::<Label>(
            (0..=MAX_STARTS_PER_CALL).map(|i| (0_u32, StartOptions::new().key(format!("o{i}")))),
        )
        .await;
    assert!(
        matches!(over, Err(Error::TooManyStarts { runs, .. }) if runs == MAX_STARTS_PER_CALL + 1),
        "{over:?}"
    );
    let none: Vec<(u32, StartOptions)> = Vec::new();
    assert!(
        client
            .start_many::<Label>(none)
            .await
            .expect("an empty call")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_times_queues_and_priorities_at_their_extremes() {
    let t = TestDb::new().await;
    let client = t.client();
    let start = |options: StartOptions| {
        let client = client.clone();
        async move { client.start_with::<Label>(&1, &options).await }
    };
    // The earliest time chrono has: due at once, now.
    let ancient = start(StartOptions::new().at(DateTime::<Utc>::MIN_UTC))
        .await
        .expect("a past time, however far back");
    assert_eq!(t.run(ancient.run_id).await.steps[0].scheduled_at, t0());
    // The latest allowed, and one millisecond past it.
    let bound = t0() + chrono::Duration::days(36_500);
    let farthest = start(StartOptions::new().at(bound))
        .await
        .expect("36,500 days ahead");
    assert_eq!(t.run(farthest.run_id).await.steps[0].scheduled_at, bound);
    let past_bound = start(StartOptions::new().at(bound + chrono::Duration::milliseconds(1)))
        .await
        .unwrap_err();
    assert_eq!(option_of(&past_bound), "at");
    let latest = start(StartOptions::new().at(DateTime::<Utc>::MAX_UTC))
        .await
        .unwrap_err();
    assert_eq!(option_of(&latest), "at");
    let longest = start(StartOptions::new().delay(Duration::MAX))
        .await
        .unwrap_err();
    assert_eq!(option_of(&longest), "delay");
    let delayed =
        start(StartOptions::new().delay(Duration::from_millis(pgbus_runtime::MAX_DURATION_MS)))
            .await
            .expect("the longest delay");
    assert_eq!(t.run(delayed.run_id).await.steps[0].scheduled_at, bound);

    // 255 characters of four bytes each; 256 is refused.
    let wide: String = "\u{1F4E6}".repeat(255);
    let boxed = start(StartOptions::new().queue(wide.clone()).priority(i16::MIN))
        .await
        .expect("255 characters");
    let row = &t.run(boxed.run_id).await.steps[0];
    assert_eq!(
        (row.queue.as_str(), row.priority),
        (wide.as_str(), i16::MIN)
    );
    let too_wide = start(StartOptions::new().queue("\u{1F4E6}".repeat(256)))
        .await
        .unwrap_err();
    assert_eq!(option_of(&too_wide), "queue");
    for odd in ["a\u{200B}b", "tab\there", "new\nline", "\u{0}"] {
        let refused = start(StartOptions::new().queue(odd)).await.unwrap_err();
        assert_eq!(option_of(&refused), "queue", "{odd:?}");
    }
    let quoted = start(StartOptions::new().queue("it's\"q\"").priority(i16::MAX))
        .await
        .expect("quotes are plain characters");
    let row = &t.run(quoted.run_id).await.steps[0];
    assert_eq!((row.queue.as_str(), row.priority), ("it's\"q\"", i16::MAX));
    // Both ends run on a worker that serves them.
    t.clock.advance(Duration::from_secs(1));
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Label)
            .queue(wide)
            .queue("it's\"q\"")
            .queue("default")
            .build()
            .expect("a worker");
    worker.run_until_idle().await.expect("a run");
    for run in [ancient.run_id, boxed.run_id, quoted.run_id] {
        assert_eq!(
            t.run(run).await.run.status,
            pgbus_runtime::RunStatus::Finished,
            "{run}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_with_options_in_a_rolled_back_transaction_leaves_nothing() {
    let t = TestDb::new().await;
    let client = t.client();
    let mut app = own_connection().await;
    let tx = app.transaction().await.expect("begin");
    client
        .start_with_in::<Label>(
            &tx,
            &1,
            &StartOptions::new().key("k").queue("q").priority(3),
        )
        .await
        .expect("a start");
    client
        .start_many_in::<Label>(
            &tx,
            [
                (2, StartOptions::new().key("k")),
                (3, StartOptions::new().key("j")),
            ],
        )
        .await
        .expect("a bulk start");
    tx.rollback().await.expect("rollback");
    for table in ["runs", "steps", "events"] {
        let rows = t
            .count(&format!("SELECT count(*) FROM {{schema}}.{table}"), &[])
            .await;
        assert_eq!(rows, 0, "{table}");
    }
    let again = client
        .start_idempotent::<Label>(&4, "k")
        .await
        .expect("a start");
    assert!(again.created, "the key is free again");
}
