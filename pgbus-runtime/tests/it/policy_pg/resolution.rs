//! Which policy answers (the step's, then the workflow's typed, then its blanket
//! ones), and how often a body runs under `max_reattempts`.

use std::any::type_name;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepStatus};

use crate::pg::{TestDb, at_ms, events, step, steps};

#[derive(Debug, thiserror::Error)]
#[error("error A")]
struct ErrA;

#[derive(Debug, thiserror::Error)]
#[error("error B")]
struct ErrB;

#[derive(Debug, thiserror::Error)]
#[error("error C")]
struct ErrC;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Which {
    A,
    B,
    C,
}

fn raise(which: Which) -> StepError {
    match which {
        Which::A => ErrA.into(),
        Which::B => ErrB.into(),
        Which::C => ErrC.into(),
    }
}

/// Blanket `skip` written first, typed `cancel` for A and C below it, and a step
/// policy for C.
struct Ordered;

#[workflow(name = "policy.ordered", input = Which, on_exception(action = "skip"))]
#[on_exception(matching(ErrA, ErrC), action = "cancel")]
impl Ordered {
    #[step(on_exception(matching(ErrC), action = "pause"))]
    async fn first(&self, cx: &mut StepCx<Which>) -> Result<(), StepError> {
        Err(raise(*cx.input()))
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Which>) {}
}

/// No policies at all.
struct Unguarded;

#[workflow(name = "policy.unguarded", input = Which)]
impl Unguarded {
    #[step]
    async fn first(&self, cx: &mut StepCx<Which>) -> Result<(), StepError> {
        Err(raise(*cx.input()))
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Which>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_resolve_step_then_workflow_typed_then_blanket_then_pause() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(Ordered)
            .register(Unguarded)
            .build()
            .expect("worker");
    let cases = [
        // The step's policy wins over the workflow's typed one.
        (
            client
                .start::<Ordered>(&Which::C)
                .await
                .expect("start")
                .run_id,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
        ),
        // The typed workflow policy wins over the blanket one written before it.
        (
            client
                .start::<Ordered>(&Which::A)
                .await
                .expect("start")
                .run_id,
            RunStatus::Cancelled,
            vec!["first#1 failed/cancelled"],
        ),
        // Nothing typed matches: the blanket one.
        (
            client
                .start::<Ordered>(&Which::B)
                .await
                .expect("start")
                .run_id,
            RunStatus::Finished,
            vec!["first#1 failed/skipped", "second#1 completed/completed"],
        ),
        // No policy: pause.
        (
            client
                .start::<Unguarded>(&Which::A)
                .await
                .expect("start")
                .run_id,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
        ),
    ];
    worker.run_until_idle().await.expect("run");
    for (run_id, status, rows) in cases {
        let view = t.run(run_id).await;
        assert_eq!(view.run.status, status, "{run_id}");
        assert_eq!(steps(&view), rows, "{run_id}");
        let paused = status == RunStatus::Paused;
        assert_eq!(
            view.error_class.is_some(),
            paused,
            "{run_id}: error columns only on a pause"
        );
    }
}

struct Flaky {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "policy.flaky")]
impl Flaky {
    #[step(on_exception(
        matching(ErrA),
        action = "reattempt",
        wait = "1s",
        max_reattempts = 2,
        terminal_action = "cancel"
    ))]
    async fn flaky(&self, _cx: &mut StepCx<()>) -> Result<(), ErrA> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ErrA)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_reattempts_runs_the_body_n_plus_one_times_then_the_terminal_action() {
    let t = TestDb::new().await;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(Flaky {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    let run_id = t.client().start::<Flaky>(&()).await.expect("start").run_id;

    for attempt in 1..=3_i64 {
        assert_eq!(worker.run_until_idle().await.expect("run"), 1);
        assert_eq!(worker.run_until_idle().await.expect("run"), 0, "waits 1 s");
        let view = t.run(run_id).await;
        if attempt < 3 {
            let next = step(&view, "flaky", i32::try_from(attempt + 1).expect("small"));
            assert_eq!(next.status, StepStatus::Scheduled);
            assert_eq!(next.scheduled_at, at_ms(attempt * 1_000));
        }
        t.clock.advance(Duration::from_secs(1));
    }
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "max_reattempts = 2: 3 runs"
    );

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Cancelled, "terminal_action");
    assert_eq!(
        steps(&view),
        [
            "flaky#1 failed/reattempted",
            "flaky#2 failed/reattempted",
            "flaky#3 failed/cancelled"
        ]
    );
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:flaky#1",
            "step_failed:flaky#1",
            "step_reattempted:flaky#1",
            "step_started:flaky#2",
            "step_failed:flaky#2",
            "step_reattempted:flaky#2",
            "step_started:flaky#3",
            "step_failed:flaky#3",
            "cancelled:flaky#3"
        ]
    );
    assert_eq!(
        view.events.last().and_then(|e| e.reason.as_deref()),
        Some("step failed after 3 attempts in a row: error A")
    );
    for s in &view.steps {
        assert_eq!(s.error_class.as_deref(), Some(type_name::<ErrA>()));
    }
}
