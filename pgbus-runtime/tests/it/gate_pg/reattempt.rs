//! Reattempts of a waiting step: one sees the signal its first attempt
//! consumed; one of a wait that timed out sees its timeout again, while a
//! resumed attempt waits afresh.

use std::any::type_name;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, RunView, SignalId};
use serde_json::{Value, json};

use super::timeout::OnPause;
use super::{named, polling};
use crate::pg::{TestDb, step, steps, t0};

#[derive(Debug, thiserror::Error)]
#[error("flaky")]
struct Flake;

/// What each attempt of `Flaky` saw: its number and the signal's payload.
type Seen = Arc<Mutex<Vec<(u32, Option<Value>)>>>;

/// Fails its first two attempts; records what each saw.
struct Flaky {
    seen: Seen,
}

#[workflow(name = "gate.flaky")]
impl Flaky {
    #[step(
        wait_for = "go",
        wait_timeout = "1h",
        on_exception(matching(Flake), action = "reattempt", wait = "1s", max_reattempts = 3)
    )]
    async fn wait(&self, cx: &mut StepCx<()>) -> Result<(), Flake> {
        let payload = cx.signal().map(|s| s.payload.clone());
        self.seen.lock().unwrap().push((cx.attempt(), payload));
        if cx.attempt() < 3 { Err(Flake) } else { Ok(()) }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_the_signal_its_first_attempt_consumed() {
    let t = TestDb::new().await;
    let client = t.client();
    let seen = Arc::default();
    let worker = polling(&t.db)
        .register(Flaky {
            seen: Arc::clone(&seen),
        })
        .build()
        .expect("worker");
    let run = client.start::<Flaky>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1, "parks");
    t.clock.advance(Duration::from_secs(5));
    let first = client.signal(run, "go", &1).await.expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    // A second signal of the name is not what the reattempts see.
    let second = client.signal(run, "go", &2).await.expect("signal");
    for _ in 0..2 {
        t.clock.advance(Duration::from_secs(1));
        assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    }

    assert_eq!(
        *seen.lock().unwrap(),
        [
            (1, Some(json!(1))),
            (2, Some(json!(1))),
            (3, Some(json!(1)))
        ]
    );
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "wait#1 failed/reattempted",
            "wait#2 failed/reattempted",
            "wait#3 completed/completed"
        ]
    );
    let attempt_one = step(&view, "wait", 1).id;
    let consumed: Vec<(SignalId, Option<i64>)> =
        view.signals.iter().map(|s| (s.id, s.consumed_by)).collect();
    assert_eq!(consumed, [(first, Some(attempt_one)), (second, None)]);
    let consumed_events = named(&view, "signal_consumed");
    assert_eq!(consumed_events.len(), 1, "consumed once");
    assert_eq!(consumed_events[0].step_id, Some(attempt_one));
    // The reattempts keep the time the step first parked.
    for s in &view.steps {
        assert_eq!(s.waiting_since, Some(t0()), "{}#{}", s.step_name, s.attempt);
    }
}

/// `on_timeout = "run"` with a reattempt policy: a body that finds no signal
/// fails and is reattempted once; what each attempt saw is kept.
struct RunRetry {
    seen: Seen,
}

#[workflow(name = "gate.run_retry")]
impl RunRetry {
    #[step(
        wait_for = "go",
        wait_timeout = "10s",
        on_timeout = "run",
        on_exception(matching(Flake), action = "reattempt", wait = "1s", max_reattempts = 1)
    )]
    async fn wait(&self, cx: &mut StepCx<()>) -> Result<(), Flake> {
        let payload = cx.signal().map(|s| s.payload.clone());
        self.seen
            .lock()
            .unwrap()
            .push((cx.attempt(), payload.clone()));
        if payload.is_none() {
            Err(Flake)
        } else {
            Ok(())
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

/// The attempts of the run's `wait_timed_out` events.
fn timed_out_attempts(view: &RunView) -> Vec<Option<i32>> {
    named(view, "wait_timed_out")
        .iter()
        .map(|e| e.attempt)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // two runs through timeout, reattempt and resume
async fn a_reattempt_sees_its_timeout_again_but_a_resumed_attempt_waits_afresh() {
    let t = TestDb::new().await;
    let client = t.client();
    let seen: Seen = Arc::default();
    let worker = polling(&t.db)
        .register(RunRetry {
            seen: Arc::clone(&seen),
        })
        .register(OnPause)
        .build()
        .expect("worker");
    let retry = client.start::<RunRetry>(&()).await.expect("start").run_id;
    let paused = client.start::<OnPause>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2, "both park");
    t.clock.advance(Duration::from_secs(10));
    // `run`: the body runs without a signal and fails, reattempted in 1 s;
    // `pause`: the run pauses.
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    assert_eq!(*seen.lock().unwrap(), [(1, None)]);
    assert_eq!(t.run(paused).await.run.status, RunStatus::Paused);

    // Signals sent after the timeouts were decided.
    let late = client.signal(retry, "go", "late").await.expect("signal");
    let while_paused = client
        .signal(paused, "go", "while paused")
        .await
        .expect("signal");
    let view = t.run(retry).await;
    assert_eq!(
        steps(&view),
        ["wait#1 failed/reattempted", "wait#2 scheduled/-"]
    );

    // The reattempt sees the timeout again: no signal, and it takes none.
    t.clock.advance(Duration::from_secs(1));
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(*seen.lock().unwrap(), [(1, None), (2, None)]);
    let view = t.run(retry).await;
    assert_eq!(view.run.status, RunStatus::Paused, "reattempts used up");
    assert_eq!(
        steps(&view),
        ["wait#1 failed/reattempted", "wait#2 failed/paused"]
    );
    assert_eq!(
        view.steps[1].error_class.as_deref(),
        Some(type_name::<Flake>())
    );
    assert_eq!(timed_out_attempts(&view), [Some(1), Some(2)]);
    assert!(named(&view, "signal_consumed").is_empty());
    assert_eq!(view.signals[0].id, late);
    assert_eq!(view.signals[0].consumed_by, None, "left unconsumed");

    // A resume resets the reattempts: the new attempt waits afresh, and each
    // run's pending signal is taken at once.
    t.clock.advance(Duration::from_mins(1));
    client.resume(retry, "ops", "go on").await.expect("resume");
    client.resume(paused, "ops", "go on").await.expect("resume");
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, None), (2, None), (3, Some(json!("late")))]
    );

    let view = t.run(retry).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "wait#1 failed/reattempted",
            "wait#2 failed/paused",
            "wait#3 completed/completed",
            "after#1 completed/completed"
        ]
    );
    let third = step(&view, "wait", 3);
    assert_eq!(third.waiting_since, None, "it never parked");
    assert_eq!(view.signals[0].consumed_by, Some(third.id));
    assert_eq!(timed_out_attempts(&view), [Some(1), Some(2)]);
    let taken = named(&view, "signal_consumed");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].attempt, Some(3));

    let view = t.run(paused).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "wait#1 failed/paused",
            "wait#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    let again = step(&view, "wait", 2);
    assert_eq!(again.output, Some(json!({"signal": "while paused"})));
    assert_eq!(again.waiting_since, None, "it never parked");
    assert_eq!(view.signals[0].id, while_paused);
    assert_eq!(view.signals[0].consumed_by, Some(again.id));
    assert_eq!(timed_out_attempts(&view), [Some(1)]);
}
