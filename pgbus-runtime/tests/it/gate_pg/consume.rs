//! A signal is consumed at the gate whether it came before the step waited or
//! woke the parked row; predicates leave what they turn down and send what fails
//! to the exception policies; a paused run keeps its signal.

use std::any::type_name;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ErrorReport, Panicked, RunStatus, SignalId, StepStatus};
use serde_json::json;

use super::{forever_from, keep_signal, named, polling};
use crate::pg::{TestDb, at_ms, events, step, steps, t0};

/// Waits for `paid`, keeps what it got, then one more step.
struct Pay;

#[workflow(name = "gate.pay")]
impl Pay {
    #[step(wait_for = "paid")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_before_the_step_waits_is_consumed_at_the_gate() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(Pay).build().expect("worker");
    let run = client.start::<Pay>(&()).await.expect("start").run_id;
    t.clock.advance(Duration::from_secs(1));
    let id = client
        .signal(run, "paid", &json!({"amount": 12}))
        .await
        .expect("signal");
    t.clock.advance(Duration::from_secs(1));
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 completed/completed", "after#1 completed/completed"]
    );
    let wait = step(&view, "wait", 1);
    assert_eq!(
        wait.output,
        Some(json!({"signal": {"amount": 12}})),
        "the body saw the payload"
    );
    assert_eq!(wait.waiting_since, None, "it never parked");
    assert_eq!(view.signals.len(), 1);
    assert_eq!(view.signals[0].id, id);
    assert_eq!(view.signals[0].consumed_by, Some(wait.id));
    assert_eq!(view.signals[0].consumed_at, Some(at_ms(2_000)));
    assert_eq!(
        events(&view),
        [
            "started",
            "signal_received",
            "step_started:wait#1",
            "signal_consumed:wait#1",
            "step_completed:wait#1",
            "step_started:after#1",
            "step_completed:after#1",
            "finished",
        ]
    );
    let consumed = named(&view, "signal_consumed");
    assert_eq!(consumed[0].details, Some(json!({"signal_id": id.0})));
    assert_eq!(consumed[0].step_id, Some(wait.id));
    assert_eq!(consumed[0].actor, worker.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_wakes_the_parked_row_and_the_same_attempt_consumes_it() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(Pay).build().expect("worker");
    let run = client.start::<Pay>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Ready, "a waiting run is ready");
    assert_eq!(steps(&view), ["wait#1 waiting/-"]);
    let parked = &view.steps[0];
    assert_eq!(parked.waiting_for.as_deref(), Some("paid"));
    assert_eq!(parked.waiting_since, Some(t0()));
    assert_eq!(parked.scheduled_at, forever_from(0), "no timeout: 36500d");
    assert_eq!(parked.stall_at, None, "a waiting row never stalls");
    let waiting = named(&view, "step_waiting");
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].reason.as_deref(), Some("signal `paid`"));

    // Nothing is due, however long nobody signals.
    t.clock.advance(Duration::from_hours(400 * 24));
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    let now = t.clock.now();
    let id = client.signal(run, "paid", "card").await.expect("signal");
    let view = t.run(run).await;
    assert_eq!(steps(&view), ["wait#1 scheduled/-"], "same attempt, woken");
    assert_eq!(view.steps[0].scheduled_at, now, "due now");
    assert_eq!(view.steps[0].id, parked.id);

    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 completed/completed", "after#1 completed/completed"]
    );
    assert_eq!(view.steps[0].output, Some(json!({"signal": "card"})));
    assert_eq!(view.steps[0].waiting_since, Some(t0()));
    assert_eq!(view.signals[0].id, id);
    assert_eq!(view.signals[0].consumed_by, Some(parked.id));
    assert_eq!(view.signals[0].consumed_at, Some(now));
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:wait#1",
            "step_waiting:wait#1",
            "signal_received",
            "step_started:wait#1",
            "signal_consumed:wait#1",
            "step_completed:wait#1",
            "step_started:after#1",
            "step_completed:after#1",
            "finished",
        ]
    );
}

/// Takes only `paid` signals whose `for` is its input.
struct Mine;

#[workflow(name = "gate.mine", input = i64)]
impl Mine {
    fn for_me(&self, cx: &StepCx<i64>, signal: &Signal) -> bool {
        signal.payload["for"] == json!(*cx.input())
    }

    #[step(wait_for(name = "paid", matches = for_me))]
    async fn wait(&self, cx: &mut StepCx<i64>) -> StepResult {
        keep_signal(cx)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_leaves_the_signals_it_turns_down_and_takes_the_first_match() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(Mine).build().expect("worker");
    let run = client.start::<Mine>(&7).await.expect("start").run_id;
    let other = client
        .signal(run, "paid", &json!({"for": 1}))
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(steps(&view), ["wait#1 waiting/-"], "turned down: parked");
    assert_eq!(view.signals[0].consumed_by, None);

    // Another turned-down signal wakes the row; it parks again, same attempt,
    // still counting from when it first parked.
    t.clock.advance(Duration::from_secs(3));
    let another = client
        .signal(run, "paid", &json!({"for": 2}))
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(steps(&view), ["wait#1 waiting/-"]);
    assert_eq!(view.steps[0].waiting_since, Some(t0()));
    assert_eq!(named(&view, "step_waiting").len(), 2);
    // A matching payload under another name (unchecked: no step waits for
    // it) wakes nothing.
    client
        .signal_unchecked(run, "shipped", &json!({"for": 7}))
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);

    let first_match = client
        .signal(run, "paid", &json!({"for": 7, "n": 1}))
        .await
        .expect("signal");
    let second_match = client
        .signal(run, "paid", &json!({"for": 7, "n": 2}))
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(steps(&view), ["wait#1 completed/completed"]);
    assert_eq!(
        view.steps[0].output,
        Some(json!({"signal": {"for": 7, "n": 1}}))
    );
    let consumed: Vec<(SignalId, Option<i64>)> =
        view.signals.iter().map(|s| (s.id, s.consumed_by)).collect();
    assert_eq!(
        consumed,
        [
            (other, None),
            (another, None),
            (SignalId(3), None),
            (first_match, Some(view.steps[0].id)),
            (second_match, None),
        ]
    );
    assert_eq!(named(&view, "signal_consumed").len(), 1);
}

#[derive(Debug, thiserror::Error)]
#[error("unreadable signal")]
struct Unreadable;

/// A predicate that fails on `garbled` (a policy skips) and panics on `panic`.
struct Picky;

#[workflow(name = "gate.picky")]
impl Picky {
    fn readable(&self, _cx: &StepCx<()>, signal: &Signal) -> Result<bool, Unreadable> {
        match signal.payload.as_str() {
            Some("panic") => panic!("the predicate panicked"),
            Some("garbled") => Err(Unreadable),
            _ => Ok(true),
        }
    }

    #[step(
        wait_for(name = "go", matches = readable),
        on_exception(matching(Unreadable), action = "skip")
    )]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_panicking_predicate_goes_to_the_exception_policies() {
    let t = TestDb::new().await;
    let client = t.client();
    let reports: Arc<Mutex<Vec<ErrorReport>>> = Arc::default();
    let seen = Arc::clone(&reports);
    let worker = polling(&t.db)
        .register(Picky)
        .on_error(move |r| seen.lock().unwrap().push(r.clone()))
        .build()
        .expect("worker");
    let garbled = client.start::<Picky>(&()).await.expect("start").run_id;
    client
        .signal(garbled, "go", "garbled")
        .await
        .expect("signal");
    let panicky = client.start::<Picky>(&()).await.expect("start").run_id;
    client.signal(panicky, "go", "panic").await.expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 3);

    // The error: the step's policy skips, and the signal stays.
    let view = t.run(garbled).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 failed/skipped", "after#1 completed/completed"]
    );
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<Unreadable>())
    );
    assert_eq!(view.steps[0].output, None, "the body did not run");
    assert_eq!(view.signals[0].consumed_by, None);
    assert!(named(&view, "signal_consumed").is_empty());

    // The panic: no policy matches, the default pauses and reports.
    let view = t.run(panicky).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["wait#1 failed/paused"]);
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<Panicked>())
    );
    assert!(
        view.steps[0]
            .error_message
            .as_deref()
            .unwrap_or_default()
            .contains("the predicate panicked"),
        "{:?}",
        view.steps[0].error_message
    );
    assert_eq!(view.error_class.as_deref(), Some(type_name::<Panicked>()));
    assert_eq!(view.signals[0].consumed_by, None);
    assert!(named(&view, "signal_consumed").is_empty());
    let reports = reports.lock().unwrap().clone();
    let mut reported: Vec<(RunId, &str)> = reports
        .iter()
        .map(|r| (r.run_id, r.class.as_str()))
        .collect();
    // The two attempts run at once, so their reports come in either order.
    reported.sort_by_key(|(run_id, _)| run_id.0);
    // Both policies report (`report` defaults to `always`).
    assert_eq!(
        reported,
        [
            (garbled, type_name::<Unreadable>()),
            (panicky, type_name::<Panicked>())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_for_a_paused_run_is_kept_and_consumed_after_resume() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(Pay).build().expect("worker");
    let run = client.start::<Pay>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1, "parks");
    client.pause(run, "ops", "hold on").await.expect("pause");
    let id = client
        .signal(run, "paid", "while paused")
        .await
        .expect("signal");

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.steps[0].status,
        StepStatus::Scheduled,
        "woken, not claimed"
    );
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    assert_eq!(t.run(run).await.signals[0].consumed_by, None);

    client.resume(run, "ops", "go on").await.expect("resume");
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        view.steps[0].output,
        Some(json!({"signal": "while paused"}))
    );
    assert_eq!(view.signals[0].id, id);
    assert_eq!(view.signals[0].consumed_by, Some(view.steps[0].id));
}
