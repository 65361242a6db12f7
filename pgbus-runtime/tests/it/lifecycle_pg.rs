//! A worker's life (issue 19): what a loop starts ends with it, however the
//! loop ends, and a step that stalls every time cannot be run again for ever.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, FailureAction, RunStatus, StallAction};
use tokio::sync::Semaphore;

use crate::pg::{TestDb, events, eventually, steps};

struct Quick;

#[workflow(name = "lifecycle.quick")]
impl Quick {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// The backends named `application_name`, and of those the one holding the
/// `LISTEN` session of `schema`.
async fn backends(t: &TestDb, application_name: &str) -> (i64, i64) {
    let listen = format!("LISTEN \"pgbus_{}\"", t.schema());
    let rows = t
        .query(
            "SELECT count(*), count(*) FILTER (WHERE query = $2)
             FROM pg_stat_activity WHERE application_name = $1",
            &[&application_name, &listen],
        )
        .await;
    (rows[0].get(0), rows[0].get(1))
}

async fn heartbeat_at(t: &TestDb, worker: &str) -> Option<DateTime<Utc>> {
    t.query(
        "SELECT heartbeat_at FROM {schema}.workers WHERE id = $1",
        &[&worker],
    )
    .await
    .first()
    .map(|row| row.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_loop_stops_its_tasks_and_a_dropped_worker_closes_its_connections() {
    let t = TestDb::new().await;
    // The worker's own handle, its connections named after the test's schema
    // (unique), so counting them counts no other test's.
    let name = t.schema().to_owned();
    let db = Database::builder(&crate::pg::database_url())
        .schema(t.db.schema().clone())
        .clock(t.db.clock().clone())
        .application_name(&name)
        .connect()
        .await
        .expect("connect");
    let worker = db
        .worker()
        .register(Quick)
        .heartbeat_interval(Duration::from_millis(100))
        .sweep_interval(Duration::from_millis(100))
        .build()
        .expect("worker");
    let id = worker.id().to_owned();
    let run = t.client().start::<Quick>(&()).await.expect("start").run_id;
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run_until(std::future::pending()).await }
    });

    // Claiming, listening, heartbeating on the pinned clock.
    assert!(
        eventually(Duration::from_secs(10), || async {
            t.run(run).await.run.status == RunStatus::Finished
        })
        .await
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            backends(&t, &name).await.1 == 1
        })
        .await,
        "the loop listens"
    );
    t.clock.advance(Duration::from_secs(1));
    assert!(
        eventually(Duration::from_secs(10), || async {
            heartbeat_at(&t, &id).await == Some(t.clock.now())
        })
        .await,
        "the heartbeat follows the pinned clock"
    );

    running.abort();
    assert!(running.await.expect_err("aborted").is_cancelled());
    assert!(
        eventually(Duration::from_secs(10), || async {
            backends(&t, &name).await.1 == 0
        })
        .await,
        "the LISTEN session closed with the loop"
    );
    let last_beat = heartbeat_at(&t, &id).await;
    assert!(last_beat.is_some(), "the row is left for the sweep");
    t.clock.advance(Duration::from_secs(1));
    // Waiting for something not to happen: ten heartbeat intervals.
    assert!(
        !eventually(Duration::from_secs(1), || async {
            heartbeat_at(&t, &id).await != last_beat
        })
        .await,
        "no heartbeat after the loop was dropped"
    );

    // Nothing the loop started holds the worker: dropping it and its
    // database closes every connection they opened (the upkeep pool's too).
    drop(worker);
    drop(db);
    assert!(
        eventually(Duration::from_secs(10), || async {
            backends(&t, &name).await.0 == 0
        })
        .await,
        "connections left: {:?}",
        backends(&t, &name).await
    );
}

/// `stuck` hangs every time, after saying so.
struct Hangs {
    entered: Arc<Semaphore>,
}

#[workflow(name = "lifecycle.hangs")]
impl Hangs {
    #[step(timeout = "10m")]
    async fn stuck(&self, _cx: &mut StepCx<()>) {
        self.entered.add_permits(1);
        std::future::pending::<()>().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_hangs_every_time_ends_in_the_stall_actions_terminal_action() {
    let t = TestDb::new().await;
    let entered = Arc::new(Semaphore::new(0));
    let worker =
        t.db.worker()
            .notifications(false)
            .stall_action(StallAction::Reattempt {
                wait: Duration::ZERO,
                max_reattempts: 2,
                terminal_action: FailureAction::Pause,
            })
            .register(Hangs {
                entered: Arc::clone(&entered),
            })
            .build()
            .expect("worker");
    let run = t.client().start::<Hangs>(&()).await.expect("start").run_id;
    let mut hung = Vec::new();
    for attempt in 1..=3 {
        hung.push(tokio::spawn({
            let worker = worker.clone();
            async move { worker.run_once().await }
        }));
        entered.acquire().await.expect("entered").forget();
        // Past the step's timeout on the pinned clock (its body's own timer,
        // ten real minutes, never fires here).
        t.clock.advance(Duration::from_mins(10));
        assert_eq!(
            worker.sweep().await.expect("sweep").repaired,
            1,
            "attempt {attempt}"
        );
    }
    assert_eq!(
        worker.run_once().await.expect("run"),
        0,
        "no fourth attempt"
    );

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        steps(&view),
        [
            "stuck#1 failed/reattempted",
            "stuck#2 failed/reattempted",
            "stuck#3 failed/paused"
        ]
    );
    let mut expected = vec!["started".to_owned()];
    for attempt in 1..=3 {
        expected.extend(
            ["step_started", "stall_detected", "step_failed"]
                .map(|e| format!("{e}:stuck#{attempt}")),
        );
        if attempt < 3 {
            expected.push(format!("step_reattempted:stuck#{attempt}"));
        }
    }
    expected.push("paused".to_owned());
    assert_eq!(events(&view), expected);
    assert_eq!(
        view.events.last().and_then(|e| e.reason.as_deref()),
        Some("step failed after 3 attempts in a row: attempt 3 of step `stuck` stalled (timeout)")
    );
    assert_eq!(
        view.error_class
            .as_deref()
            .map(|c| c.ends_with("StepStalled")),
        Some(true)
    );
    for body in hung {
        body.abort();
    }
}
