//! A reattempt of a wait that timed out sees its timeout again; a resumed
//! attempt waits afresh.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepOutcome};
use pgbus_testkit::TestEnv;

#[derive(Debug, thiserror::Error)]
#[error("no signal")]
struct NoSignal;

/// What each attempt's body saw: its number and the signal's payload.
type Seen = Arc<Mutex<Vec<(u32, Option<serde_json::Value>)>>>;

/// `on_timeout = "run"` with a reattempt policy: a body that finds no signal
/// fails, and is reattempted once.
struct RunRetry {
    seen: Seen,
}

#[workflow(name = "shop.run_retry")]
impl RunRetry {
    #[step(
        wait_for = "go",
        wait_timeout = "10s",
        on_timeout = "run",
        on_exception(
            matching(NoSignal),
            action = "reattempt",
            wait = "1s",
            max_reattempts = 1
        )
    )]
    async fn wait(&self, cx: &mut StepCx<()>) -> Result<(), NoSignal> {
        let payload = cx.signal().map(|s| s.payload.clone());
        self.seen
            .lock()
            .unwrap()
            .push((cx.attempt(), payload.clone()));
        payload.map(drop).ok_or(NoSignal)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

/// `on_timeout = "pause"` after 10 s; keeps what it got.
struct PauseOnTimeout;

#[workflow(name = "shop.pause_on_timeout")]
impl PauseOnTimeout {
    #[step(wait_for = "go", wait_timeout = "10s")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

/// The attempts of the run's `wait_timed_out` events.
fn timed_out_attempts(env: &TestEnv, run: RunId) -> Vec<Option<i32>> {
    env.run(run)
        .unwrap()
        .events
        .iter()
        .filter(|e| e.event == "wait_timed_out")
        .map(|e| e.attempt)
        .collect()
}

#[tokio::test]
async fn a_reattempt_sees_its_timeout_again_but_a_resumed_attempt_waits_afresh() {
    let seen: Seen = Arc::default();
    let env = TestEnv::new()
        .register(RunRetry {
            seen: Arc::clone(&seen),
        })
        .register(PauseOnTimeout);
    let retry = env.start::<RunRetry>(&()).unwrap().run_id;
    let paused = env.start::<PauseOnTimeout>(&()).unwrap().run_id;
    assert_eq!(env.run_until_idle().await.len(), 2, "both park");
    env.advance(Duration::from_secs(10));
    assert_eq!(env.run_until_idle().await.len(), 2);
    assert_eq!(*seen.lock().unwrap(), [(1, None)]);
    assert_eq!(env.run(paused).unwrap().run.status, RunStatus::Paused);

    // Signals sent after each timeout was decided.
    env.signal(retry, "go", &"late").unwrap();
    env.signal(paused, "go", &"while paused").unwrap();
    env.advance(Duration::from_secs(1));
    let records = env.run_until_idle().await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].attempt, records[0].outcome),
        (2, Some(StepOutcome::Paused)),
        "the reattempt saw the timeout again, failed, and used up its reattempts"
    );
    assert_eq!(*seen.lock().unwrap(), [(1, None), (2, None)]);
    let view = env.run(retry).unwrap();
    assert_eq!(view.signals[0].consumed_by, None, "left unconsumed");
    assert_eq!(timed_out_attempts(&env, retry), [Some(1), Some(2)]);

    // A resume resets the reattempts: the new attempt waits afresh and takes
    // the pending signal at once.
    env.resume(retry, "ops", "go on").unwrap();
    env.resume(paused, "ops", "go on").unwrap();
    env.run_until_idle().await;
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, None), (2, None), (3, Some(serde_json::json!("late")))]
    );
    for (run, attempt, timeouts) in [
        (retry, 3, vec![Some(1), Some(2)]),
        (paused, 2, vec![Some(1)]),
    ] {
        let view = env.run(run).unwrap();
        assert_eq!(view.run.status, RunStatus::Finished);
        let taking = view
            .steps
            .iter()
            .find(|s| s.step_name == "wait" && s.attempt == attempt)
            .expect("the resumed attempt");
        assert_eq!(taking.outcome, Some(StepOutcome::Completed));
        assert_eq!(taking.waiting_since, None, "it never parked");
        assert_eq!(view.signals[0].consumed_by, Some(taking.id));
        assert_eq!(timed_out_attempts(&env, run), timeouts);
    }
    let view = env.run(paused).unwrap();
    assert_eq!(
        view.steps[1].output,
        Some(serde_json::json!("while paused"))
    );
}
