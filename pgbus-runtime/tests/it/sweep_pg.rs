//! The sweep: attempts past their stall horizon or held by a worker that stopped
//! heartbeating end with `StepStalled` and the stall action; a healthy attempt is
//! left alone; the first body's completion then loses its fence.

use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StallAction, StepOutcome, StepStatus, SweepReport, Worker};
use tokio::sync::Notify;

use crate::pg::TestDb;

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

struct Hung {
    gate: Arc<Gate>,
}

#[workflow(name = "sweep.hung")]
impl Hung {
    #[step(timeout = "5s")]
    async fn slow(&self, _cx: &mut StepCx<()>) {
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
    }

    #[step]
    async fn next(&self, _cx: &mut StepCx<()>) {}
}

fn worker(t: &TestDb, gate: &Arc<Gate>, action: StallAction) -> Worker {
    t.db.worker()
        .notifications(false)
        .stall_action(action)
        .register(Hung {
            gate: Arc::clone(gate),
        })
        .build()
        .expect("worker")
}

/// Starts a run and leaves its first attempt hanging in worker `a`'s hands.
async fn hang(t: &TestDb, a: &Worker, gate: &Arc<Gate>) -> (RunId, tokio::task::JoinHandle<usize>) {
    let run = t.client().start::<Hung>(&()).await.expect("start");
    let a = a.clone();
    let hung = tokio::spawn(async move { a.run_once().await.expect("run") });
    gate.entered.notified().await;
    (run, hung)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_its_timeout_is_paused_and_its_late_completion_ignored() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let sweeper = worker(&t, &gate, StallAction::Pause);
    let (run, hung) = hang(&t, &a, &gate).await;

    assert_eq!(
        sweeper.sweep().await.expect("sweep"),
        SweepReport::default(),
        "not stalled yet"
    );
    t.clock.advance(Duration::from_secs(5));
    let report = sweeper.sweep().await.expect("sweep");
    assert_eq!(report.repaired, 1);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(view.steps[0].status, StepStatus::Failed);
    assert!(
        view.steps[0]
            .error_class
            .as_deref()
            .unwrap_or_default()
            .ends_with("StepStalled")
    );
    let stall = view
        .events
        .iter()
        .find(|e| e.event == "stall_detected")
        .expect("stall_detected");
    assert_eq!(stall.reason.as_deref(), Some("timeout"));
    assert_eq!(stall.actor, "sweep");

    gate.release.notify_one();
    hung.await.expect("join");
    let after = t.run(run).await;
    assert_eq!(
        after.events.last().map(|e| e.event.as_str()),
        Some("late_completion_ignored")
    );
    assert_eq!(
        t.run(run).await.run.status,
        RunStatus::Paused,
        "the late body changed nothing"
    );
    assert_eq!(
        sweeper.sweep().await.expect("sweep"),
        SweepReport::default(),
        "repaired once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stopped_heartbeating_loses_its_attempts_which_are_reattempted() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let sweeper = worker(
        &t,
        &gate,
        StallAction::Reattempt {
            wait: Duration::from_secs(1),
        },
    );
    let (run, hung) = hang(&t, &a, &gate).await;

    // Far below the step's 5 s timeout, far above nothing: a fresh heartbeat.
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 0);
    // The worker's row says it was alive 31 s ago: lost (threshold 30 s).
    t.execute(
        "UPDATE {schema}.workers SET heartbeat_at = heartbeat_at - interval '31 seconds' WHERE id = $1",
        &[&a.id()],
    )
    .await;
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 1);

    let view = t.run(run).await;
    let stall = view
        .events
        .iter()
        .find(|e| e.event == "stall_detected")
        .expect("stall_detected");
    assert_eq!(stall.reason.as_deref(), Some("worker_lost"));
    assert_eq!(view.steps[0].outcome, Some(StepOutcome::Reattempted));
    assert_eq!(view.steps[1].attempt, 2);

    gate.release.notify_one();
    hung.await.expect("join");
    // The new attempt runs on the sweeper after its wait; the gate lets it through.
    t.clock.advance(Duration::from_secs(1));
    gate.release.notify_one();
    sweeper.run_until_idle().await.expect("run");
    let done = t.run(run).await;
    assert_eq!(done.run.status, RunStatus::Finished);
    assert!(
        done.events
            .iter()
            .any(|e| e.event == "late_completion_ignored")
    );
}
