//! Guards that cancel or skip before the body, and guards that fail.

use std::any::type_name;
use std::sync::{Arc, Mutex};

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use crate::pg::{TestDb, events, step, steps};

#[derive(Debug, thiserror::Error)]
#[error("the skip guard failed")]
struct SkipGuardFailed;

#[derive(Debug, thiserror::Error)]
#[error("the cancel guard failed")]
struct CancelGuardFailed;

/// Which guard says what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Guards {
    Cancel,
    CancelFails,
    Skip,
    SkipFails,
    Neither,
}

struct Guarded {
    calls: Arc<Mutex<Vec<&'static str>>>,
}

impl Guarded {
    fn record(&self, call: &'static str) {
        self.calls.lock().expect("not poisoned").push(call);
    }
}

#[workflow(name = "policy.guarded", input = Guards, cancel_if = should_cancel)]
impl Guarded {
    fn should_cancel(&self, cx: &StepCx<Guards>) -> Result<bool, CancelGuardFailed> {
        match cx.input() {
            Guards::CancelFails => Err(CancelGuardFailed),
            guards => Ok(*guards == Guards::Cancel),
        }
    }

    fn should_skip(&self, cx: &StepCx<Guards>) -> Result<bool, SkipGuardFailed> {
        match cx.input() {
            Guards::SkipFails => Err(SkipGuardFailed),
            guards => Ok(*guards == Guards::Skip),
        }
    }

    #[step(skip_if = should_skip, on_exception(matching(SkipGuardFailed), action = "cancel"))]
    async fn first(&self, _cx: &mut StepCx<Guards>) {
        self.record("first");
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Guards>) {
        self.record("second");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one table of every guard outcome reads best in one place
async fn guards_cancel_or_skip_before_the_body_and_their_errors_go_to_the_policies() {
    let cases = [
        (
            Guards::Cancel,
            RunStatus::Cancelled,
            vec!["first#1 cancelled/cancelled"],
            vec!["started", "step_started:first#1", "cancelled:first#1"],
            Some("cancel_if `should_cancel` is true"),
            vec![],
            None,
        ),
        (
            Guards::Skip,
            RunStatus::Finished,
            vec!["first#1 skipped/skipped", "second#1 completed/completed"],
            vec![
                "started",
                "step_started:first#1",
                "step_skipped:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            Some("skip_if `should_skip` is true"),
            vec!["second"],
            None,
        ),
        // skip_if fails: the step's policy for its error cancels.
        (
            Guards::SkipFails,
            RunStatus::Cancelled,
            vec!["first#1 failed/cancelled"],
            vec![
                "started",
                "step_started:first#1",
                "step_failed:first#1",
                "cancelled:first#1",
            ],
            Some("step failed: the skip guard failed"),
            vec![],
            Some(type_name::<SkipGuardFailed>()),
        ),
        // cancel_if fails: no policy matches, the default pauses.
        (
            Guards::CancelFails,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            vec![
                "started",
                "step_started:first#1",
                "step_failed:first#1",
                "paused",
            ],
            Some("step failed: the cancel guard failed"),
            vec![],
            Some(type_name::<CancelGuardFailed>()),
        ),
        (
            Guards::Neither,
            RunStatus::Finished,
            vec![
                "first#1 completed/completed",
                "second#1 completed/completed",
            ],
            vec![
                "started",
                "step_started:first#1",
                "step_completed:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            None,
            vec!["first", "second"],
            None,
        ),
    ];
    let t = TestDb::new().await;
    for (guards, status, rows, trail, reason, bodies, error_class) in cases {
        let calls: Arc<Mutex<Vec<&'static str>>> = Arc::default();
        let worker =
            t.db.worker()
                .register(Guarded {
                    calls: Arc::clone(&calls),
                })
                .build()
                .expect("worker");
        let run_id = t
            .client()
            .start::<Guarded>(&guards)
            .await
            .expect("start")
            .run_id;
        worker.run_until_idle().await.expect("run");

        let view = t.run(run_id).await;
        assert_eq!(view.run.status, status, "{guards:?}");
        assert_eq!(steps(&view), rows, "{guards:?}");
        assert_eq!(events(&view), trail, "{guards:?}");
        if let Some(reason) = reason {
            assert!(
                view.events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some(reason)),
                "{guards:?}: {:?}",
                view.events
            );
        }
        assert_eq!(*calls.lock().expect("not poisoned"), bodies, "{guards:?}");
        assert_eq!(
            step(&view, "first", 1).error_class.as_deref(),
            error_class,
            "{guards:?}"
        );
    }
}
