//! A handler answers with a verb; no answer, or its failure, pauses the run.

use std::any::type_name;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ErrorReport, RunStatus};

use crate::pg::{TestDb, events, steps};

#[derive(Debug, thiserror::Error)]
#[error("the body failed")]
struct BodyFailed;

#[derive(Debug, thiserror::Error)]
#[error("the handler failed")]
struct HandlerFailed;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Answer {
    Skip,
    Reattempt,
    Nothing,
    Fails,
}

struct Handled {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "policy.handled", input = Answer)]
#[on_exception(handler = triage)]
impl Handled {
    fn triage(
        &self,
        cx: &StepCx<Answer>,
        error: &StepError,
    ) -> Result<Option<Flow>, HandlerFailed> {
        assert!(error.is::<BodyFailed>());
        match cx.input() {
            Answer::Skip => Ok(Some(Flow::skip("handled: skip"))),
            Answer::Reattempt if cx.attempt() == 1 => Ok(Some(Flow::reattempt(Duration::ZERO))),
            Answer::Reattempt => Ok(Some(Flow::cancel("handled: enough"))),
            Answer::Nothing => Ok(None),
            Answer::Fails => Err(HandlerFailed),
        }
    }

    #[step]
    async fn first(&self, _cx: &mut StepCx<Answer>) -> Result<(), BodyFailed> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(BodyFailed)
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Answer>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_answers_with_a_verb_and_no_answer_or_its_failure_pauses() {
    let t = TestDb::new().await;
    let calls = Arc::new(AtomicU32::new(0));
    let reports: Arc<Mutex<Vec<ErrorReport>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let worker =
        t.db.worker()
            .register(Handled {
                calls: Arc::clone(&calls),
            })
            .on_error(move |report| sink.lock().expect("not poisoned").push(report.clone()))
            .build()
            .expect("worker");
    let client = t.client();
    let cases = [
        (
            Answer::Skip,
            RunStatus::Finished,
            vec!["first#1 failed/skipped", "second#1 completed/completed"],
            ("step_skipped", "handled: skip"),
        ),
        (
            Answer::Reattempt,
            RunStatus::Cancelled,
            vec!["first#1 failed/reattempted", "first#2 failed/cancelled"],
            ("cancelled", "handled: enough"),
        ),
        (
            Answer::Nothing,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            (
                "paused",
                "handler `triage` gave no verb for: the body failed",
            ),
        ),
        (
            Answer::Fails,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            ("paused", "handler `triage` failed: the handler failed"),
        ),
    ];
    let mut started = Vec::new();
    for (answer, ..) in &cases {
        started.push(client.start::<Handled>(answer).await.expect("start").run_id);
    }
    worker.run_until_idle().await.expect("run");

    for ((answer, status, rows, (event, reason)), run_id) in cases.iter().zip(&started) {
        let view = t.run(*run_id).await;
        assert_eq!(view.run.status, *status, "{answer:?}");
        assert_eq!(steps(&view), *rows, "{answer:?}");
        let found = view
            .events
            .iter()
            .find(|e| e.event == *event)
            .unwrap_or_else(|| panic!("{answer:?}: no {event} in {:?}", events(&view)));
        assert_eq!(found.reason.as_deref(), Some(*reason), "{answer:?}");
        if *status == RunStatus::Paused {
            // The run keeps the step's error, not the handler's.
            assert_eq!(
                view.error_class.as_deref(),
                Some(type_name::<BodyFailed>()),
                "{answer:?}"
            );
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let reported = reports.lock().expect("not poisoned").clone();
    assert_eq!(
        reported.len(),
        6,
        "report = always: every handled error, plus the failing handler's own error"
    );
    assert!(
        reported.iter().any(|r| r.message == "the handler failed"),
        "the handler's own error is reported: {reported:?}"
    );
}
