//! Signals sent while an attempt is in progress: after the claim decided on the
//! timeout (it loses and stays unconsumed), or before the row parks (it is not
//! lost).

use std::any::type_name;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Client, RunStatus, WaitTimedOut};
use serde_json::json;

use super::{keep_signal, named, polling, send_now};
use crate::pg::{TestDb, step, steps, t0};

/// `on_timeout = "run"`: a body that finds no signal sends one itself, after
/// the claim decided on the timeout.
struct LateRun {
    client: Client,
}

#[workflow(name = "gate.late_run")]
impl LateRun {
    #[step(wait_for = "go", wait_timeout = "10s", on_timeout = "run")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        if cx.signal().is_none() {
            self.client.signal(cx.run_id(), "go", "too late").await?;
        }
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

/// `on_timeout = "pause"`, whose guard sends the signal once armed: after the
/// claim, before the gate's outcome.
struct LatePause {
    client: Client,
    armed: Arc<AtomicBool>,
}

#[workflow(name = "gate.late_pause")]
impl LatePause {
    fn meddle(&self, cx: &StepCx<()>) -> bool {
        if self.armed.swap(false, Ordering::SeqCst) {
            send_now(&self.client, cx.run_id(), "go", &json!("too late"));
        }
        false
    }

    #[step(wait_for = "go", wait_timeout = "10s", skip_if = meddle)]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signal_after_the_claim_decided_on_the_timeout_loses_and_stays_unconsumed() {
    let t = TestDb::new().await;
    let client = t.client();
    let armed = Arc::new(AtomicBool::new(false));
    let worker = polling(&t.db)
        .register(LateRun { client: t.client() })
        .register(LatePause {
            client: t.client(),
            armed: Arc::clone(&armed),
        })
        .build()
        .expect("worker");
    let ran = client.start::<LateRun>(&()).await.expect("start").run_id;
    let paused = client.start::<LatePause>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2, "both park");
    t.clock.advance(Duration::from_secs(10));
    armed.store(true, Ordering::SeqCst);
    // LateRun: its body and then `after`; LatePause: the timeout.
    assert_eq!(worker.run_until_idle().await.expect("run"), 3);

    // `run`: the timeout won; the body's own signal stays unconsumed.
    let view = t.run(ran).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 completed/completed", "after#1 completed/completed"]
    );
    assert_eq!(view.steps[0].output, Some(json!({"signal": null})));
    assert_eq!(named(&view, "wait_timed_out").len(), 1);
    assert!(named(&view, "signal_consumed").is_empty());
    assert_eq!(view.signals.len(), 1);
    assert_eq!(view.signals[0].consumed_by, None);

    // `pause`: the signal that came after the claim is not taken by it...
    let view = t.run(paused).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["wait#1 failed/paused"]);
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<WaitTimedOut>())
    );
    assert_eq!(named(&view, "wait_timed_out").len(), 1);
    assert!(named(&view, "signal_consumed").is_empty());
    assert_eq!(view.signals.len(), 1);
    assert_eq!(view.signals[0].consumed_by, None);
    // ...but it is kept: the attempt a resume starts takes it at once.
    client.resume(paused, "ops", "go on").await.expect("resume");
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    let view = t.run(paused).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    let again = step(&view, "wait", 2);
    assert_eq!(again.output, Some(json!({"signal": "too late"})));
    assert_eq!(again.waiting_since, None, "it never parked");
    assert_eq!(view.signals[0].consumed_by, Some(again.id));
}

/// Sends its own signal from a guard, once armed: while the attempt is in
/// progress, after its claim read the signals, before it parks.
struct Meddler {
    client: Client,
    armed: Arc<AtomicBool>,
}

#[workflow(name = "gate.meddler")]
impl Meddler {
    fn meddle(&self, cx: &StepCx<()>) -> bool {
        if self.armed.swap(false, Ordering::SeqCst) {
            send_now(&self.client, cx.run_id(), "go", &json!("meddled"));
        }
        false
    }

    #[step(wait_for = "go", skip_if = meddle)]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }
}

/// Turns down `no`; the first time it does, sends a `yes` (after the claim
/// read the signals, before the row parks).
struct PickyMeddler {
    client: Client,
    armed: Arc<AtomicBool>,
}

#[workflow(name = "gate.picky_meddler")]
impl PickyMeddler {
    fn yes(&self, cx: &StepCx<()>, signal: &Signal) -> bool {
        if self.armed.swap(false, Ordering::SeqCst) {
            send_now(&self.client, cx.run_id(), "go", &json!("yes"));
        }
        signal.payload == json!("yes")
    }

    #[step(wait_for(name = "go", matches = yes))]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signal_sent_while_the_step_is_in_progress_is_not_lost() {
    let t = TestDb::new().await;
    let client = t.client();
    let armed = Arc::new(AtomicBool::new(true));
    let picky_armed = Arc::new(AtomicBool::new(true));
    let worker = polling(&t.db)
        .register(Meddler {
            client: t.client(),
            armed: Arc::clone(&armed),
        })
        .register(PickyMeddler {
            client: t.client(),
            armed: Arc::clone(&picky_armed),
        })
        .build()
        .expect("worker");
    let plain = client.start::<Meddler>(&()).await.expect("start").run_id;
    let picky = client
        .start::<PickyMeddler>(&())
        .await
        .expect("start")
        .run_id;
    client.signal(picky, "go", "no").await.expect("signal");

    // One round: each claim reads no usable signal, one arrives, the row parks.
    assert_eq!(worker.run_once().await.expect("run"), 2);
    assert!(!armed.load(Ordering::SeqCst) && !picky_armed.load(Ordering::SeqCst));
    for id in [plain, picky] {
        let view = t.run(id).await;
        assert_eq!(
            steps(&view),
            ["wait#1 scheduled/-"],
            "woken as it parked, not left waiting"
        );
        assert_eq!(view.steps[0].scheduled_at, t0());
        assert_eq!(view.steps[0].waiting_since, Some(t0()));
        assert_eq!(named(&view, "step_waiting").len(), 1);
        assert!(view.signals.iter().all(|s| s.consumed_by.is_none()));
    }

    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    for (id, payload, position) in [(plain, "meddled", 0), (picky, "yes", 1)] {
        let view = t.run(id).await;
        assert_eq!(view.run.status, RunStatus::Finished, "{payload}");
        assert_eq!(steps(&view), ["wait#1 completed/completed"]);
        assert_eq!(view.steps[0].output, Some(json!({"signal": payload})));
        assert_eq!(
            view.signals[position].consumed_by,
            Some(view.steps[0].id),
            "{payload}"
        );
        assert_eq!(
            view.signals
                .iter()
                .filter(|s| s.consumed_by.is_some())
                .count(),
            1
        );
    }
}
