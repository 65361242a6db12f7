//! The outcome path against the real server, where the worker's public API cannot
//! reach: an outcome retried after its first try committed with the reply lost.

use super::*;
use crate::engine::Verb;
use crate::prelude::*;
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
    let run = client.start::<Once>(&()).await.expect("start");
    let claim = store
        .claim(
            &["default".to_owned()],
            &["store.once".to_owned()],
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    let first = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, false)
        .await
        .expect("end");
    assert!(matches!(first, Ended::Applied(_)));
    let again = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, true)
        .await
        .expect("end");
    assert!(matches!(again, Ended::Applied(_)), "its own earlier commit");
    assert_eq!(late_events(store, run).await, 0);
    assert_eq!(client.run(run).await.expect("run").steps.len(), 2);

    // Not a retry: the same call is a late completion.
    let late = store
        .end_attempt(Once::DEFINITION, &claim, "w1", &ok, false)
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
    let other = client.start::<Once>(&()).await.expect("start");
    let claim = store
        .claim(
            &["default".to_owned()],
            &["store.once".to_owned()],
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
        .end_attempt(Once::DEFINITION, &claim, "w1", &cancelled, true)
        .await
        .expect("end");
    assert!(matches!(retried, Ended::Late));
    assert_eq!(late_events(store, other).await, 1);

    // A retry of an attempt the sweep took over, after this same worker
    // completed the reattempt: its events are about the other attempt, so the
    // retry is a late completion, not "already recorded".
    let third = client.start::<Once>(&()).await.expect("start");
    let first_try = store
        .claim(
            &["default".to_owned()],
            &["store.once".to_owned()],
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(first_try.run_id, third);
    let stalled = crate::engine::stalled_result(
        crate::engine::StallAction::Reattempt {
            wait: std::time::Duration::ZERO,
        },
        true,
        "only",
        1,
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
            &["store.once".to_owned()],
            1,
            "w1",
            60_000,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!((second_try.run_id, second_try.attempt), (third, 2));
    let done = store
        .end_attempt(Once::DEFINITION, &second_try, "w1", &ok, false)
        .await
        .expect("end");
    assert!(matches!(done, Ended::Applied(_)));
    let stale = store
        .end_attempt(Once::DEFINITION, &first_try, "w1", &ok, true)
        .await
        .expect("end");
    assert!(matches!(stale, Ended::Late), "not its own earlier commit");
    assert_eq!(late_events(store, third).await, 1);

    drop_schema(&db).await;
}
