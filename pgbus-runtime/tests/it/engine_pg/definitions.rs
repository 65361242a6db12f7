//! Definitions that changed under a run: a removed step with a gravestone, and
//! a renamed one without.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use crate::pg::{TestDb, events, step, steps};

// Two builds of one workflow: the first had a `legacy` step that the second
// removed with a gravestone.
struct EvolvingV1;

#[workflow(name = "engine.evolving")]
impl EvolvingV1 {
    #[step]
    async fn legacy(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

struct EvolvingV2 {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.evolving")]
impl EvolvingV2 {
    removed_step!(legacy);

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_for_a_removed_step_is_skipped_and_the_run_advances() {
    let t = TestDb::new().await;
    let run_id = t
        .client()
        .start::<EvolvingV1>(&())
        .await
        .expect("start")
        .run_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(EvolvingV2 {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["legacy#1 skipped/skipped", "after#1 completed/completed"]
    );
    assert_eq!(
        events(&view),
        [
            "started",
            // Issue 19: a run started by V1 and taken over by a V2 worker
            // says so once.
            "definition_changed:legacy#1",
            "step_started:legacy#1",
            "step_skipped:legacy#1",
            "step_started:after#1",
            "step_completed:after#1",
            "finished"
        ]
    );
    let skipped = &view.events[3];
    assert_eq!(
        skipped.reason.as_deref(),
        Some("step `legacy` was removed from the workflow")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// Two builds of one workflow: the second renamed `old_name` without a gravestone.
struct RenamedV1;

#[workflow(name = "engine.renamed")]
impl RenamedV1 {
    #[step]
    async fn old_name(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn tail(&self, _cx: &mut StepCx<()>) {}
}

struct RenamedV2 {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.renamed")]
impl RenamedV2 {
    #[step]
    async fn new_name(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    #[step]
    async fn tail(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

// Issue 19 changed this case: a worker no longer claims a step its definition
// lacks (the row waits for a worker that has it), so the run is paused by the
// sweep's grace rule once the row has been due for longer than the grace with
// no live worker that has the step, not by the claim at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_for_a_step_the_definition_lacks_pauses_the_run() {
    let t = TestDb::new().await;
    let run_id = t
        .client()
        .start::<RenamedV1>(&())
        .await
        .expect("start")
        .run_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(RenamedV2 {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "not claimed: the worker lacks the step"
    );
    assert_eq!(t.run(run_id).await.run.status, RunStatus::Ready);
    t.clock
        .advance(pgbus_runtime::worker::DEFAULT_UNDEFINED_STEP_GRACE);
    t.clock.advance(std::time::Duration::from_secs(1));
    worker.heartbeat().await.expect("heartbeat");
    assert_eq!(worker.sweep().await.expect("sweep").undefined_paused, 1);
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "paused, not a crash loop"
    );

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["old_name#1 failed/paused"]);
    assert_eq!(
        events(&view),
        ["started", "step_failed:old_name#1", "paused"]
    );
    let row = step(&view, "old_name", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::StepNotDefined")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("workflow `engine.renamed` has no step `old_name`")
    );
    assert_eq!(view.error_class, row.error_class);
    assert_eq!(view.error_message, row.error_message);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");
}
