//! Completions that lost their fence, and a pause that lands while a step runs.

use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepStatus};
use tokio::sync::Notify;

use crate::pg::{TestDb, at_ms, events, step, steps, t0};

/// Its first step records an output, says it has begun, and waits for the test
/// to let it finish.
struct Gated {
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

impl Gated {
    fn new() -> Self {
        Self {
            entered: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
        }
    }

    fn handles(&self) -> (Arc<Notify>, Arc<Notify>) {
        (Arc::clone(&self.entered), Arc::clone(&self.release))
    }
}

#[workflow(name = "engine.gated", input = bool)]
impl Gated {
    #[step]
    async fn hold(&self, cx: &mut StepCx<bool>) -> StepResult {
        cx.output(&"from the held attempt")?;
        self.entered.notify_one();
        self.release.notified().await;
        // Input `true`: this is the last step.
        Ok(if *cx.input() {
            Flow::Finish
        } else {
            Flow::Complete
        })
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<bool>) {}
}

/// Starts a `Gated` run, has the worker claim it in a task, runs `meddle` while the
/// body waits, lets the body finish, and returns the run's id.
async fn interleave(t: &TestDb, last_step: bool, meddle: &str) -> (pgbus_runtime::RunId, String) {
    let gated = Gated::new();
    let (entered, release) = gated.handles();
    let worker = t.db.worker().register(gated).build().expect("worker");
    let run_id = t
        .client()
        .start::<Gated>(&last_step)
        .await
        .expect("start")
        .run_id;

    let running = worker.clone();
    let attempt = tokio::spawn(async move { running.run_once().await });
    tokio::time::timeout(Duration::from_secs(5), entered.notified())
        .await
        .expect("the body starts");
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Performing);
    assert_eq!(step(&view, "hold", 1).status, StepStatus::InProgress);

    t.clock.advance(Duration::from_secs(1));
    t.execute(meddle, &[&run_id.0, &t.clock.now()]).await;
    release.notify_one();
    let ran = tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .expect("the attempt ends")
        .expect("no panic")
        .expect("no database error");
    assert_eq!(ran, 1);
    (run_id, worker.id().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_lost_its_fence_is_ignored_and_recorded() {
    let cases = [
        (
            "the step row was cancelled",
            "UPDATE {schema}.steps SET status = 'cancelled', outcome = 'cancelled', finished_at = $2
             WHERE run_id = $1",
            RunStatus::Performing,
            StepStatus::Cancelled,
        ),
        (
            "another worker holds the attempt",
            "UPDATE {schema}.steps SET worker_id = 'worker-elsewhere', started_at = $2
             WHERE run_id = $1",
            RunStatus::Performing,
            StepStatus::InProgress,
        ),
        (
            "the run was cancelled while the step ran",
            "WITH s AS (UPDATE {schema}.steps SET status = 'cancelled', outcome = 'cancelled',
                                                  finished_at = $2
                        WHERE run_id = $1 AND status = 'in_progress')
             UPDATE {schema}.runs SET status = 'cancelled', cancelled_at = $2, updated_at = $2
             WHERE id = $1",
            RunStatus::Cancelled,
            StepStatus::Cancelled,
        ),
    ];
    for (what, meddle, run_status, step_status) in cases {
        let t = TestDb::new().await;
        let (run_id, worker_id) = interleave(&t, false, meddle).await;
        let view = t.run(run_id).await;
        assert_eq!(view.run.status, run_status, "{what}: the run is untouched");
        assert_eq!(
            view.run.updated_at,
            if run_status == RunStatus::Cancelled {
                at_ms(1_000)
            } else {
                t0()
            },
            "{what}"
        );
        assert_eq!(steps(&view).len(), 1, "{what}: nothing scheduled next");
        let row = step(&view, "hold", 1);
        assert_eq!(row.status, step_status, "{what}");
        assert_eq!(row.output, None, "{what}: the late output is discarded");
        assert_eq!(
            events(&view),
            [
                "started",
                "step_started:hold#1",
                "late_completion_ignored:hold#1"
            ],
            "{what}"
        );
        let late = &view.events[2];
        assert_eq!(late.step_id, Some(row.id), "{what}");
        assert_eq!(late.actor, worker_id, "{what}");
        assert_eq!(late.created_at, at_ms(1_000), "{what}");
        let details = late.details.as_ref().expect("details");
        assert_eq!(details["verb"], "Complete", "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_lands_while_a_step_runs_holds_the_run() {
    let pause = "UPDATE {schema}.runs SET status = 'paused', paused_at = $2, updated_at = $2
                 WHERE id = $1";

    // Not the last step: the outcome is recorded and the next row scheduled, but
    // the run stays paused, and nothing claims the next row.
    let t = TestDb::new().await;
    let (run_id, _) = interleave(&t, false, pause).await;
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(view.paused_at, Some(at_ms(1_000)));
    assert_eq!(view.run.current_step.as_deref(), Some("after"));
    assert_eq!(
        steps(&view),
        ["hold#1 completed/completed", "after#1 scheduled/-"]
    );
    assert_eq!(
        step(&view, "hold", 1).output,
        Some(serde_json::json!("from the held attempt"))
    );
    let worker =
        t.db.worker()
            .register(Gated::new())
            .build()
            .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 0, "held");

    // The last step still finishes the run.
    let t = TestDb::new().await;
    let (run_id, _) = interleave(&t, true, pause).await;
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.run.finished_at, Some(at_ms(1_000)));
    assert_eq!(steps(&view), ["hold#1 completed/finished_early"]);
}
