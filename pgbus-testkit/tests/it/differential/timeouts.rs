//! Timeouts across turned-down signals, signal pages and reattempts.

use super::signals::{TimeoutPause, event_names};
use super::*;

/// Waits for a `go` its predicate accepts, for 10 minutes, then skips.
pub(super) struct PickyTimeout;

#[workflow(name = "diff.picky_timeout", input = u8, queue = "diff")]
impl PickyTimeout {
    fn accepts(&self, _cx: &StepCx<u8>, signal: &Signal) -> bool {
        signal.payload["ok"] != false
    }

    #[step(wait_for(name = "go", matches = accepts), wait_timeout = "10m", on_timeout = "skip")]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

/// Two steps that wait for the same signal name: each consumes its own.
pub(super) struct TwoWaits;

#[workflow(name = "diff.two_waits", input = u8, queue = "diff")]
impl TwoWaits {
    #[step(wait_for = "go")]
    async fn first(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }

    #[step(wait_for = "go")]
    async fn second(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turned_down_signal_does_not_restart_the_timeout_and_each_wait_takes_its_own() {
    let projections = both_drivers(
        |env| env.register(PickyTimeout).register(TwoWaits),
        |worker| worker.register(PickyTimeout).register(TwoWaits),
        |driver| async move {
            let picky = driver.start::<PickyTimeout>(&1).await;
            let both_early = driver.start::<TwoWaits>(&2).await;
            let one_early = driver.start::<TwoWaits>(&3).await;
            for n in [1, 2] {
                driver
                    .signal(both_early, "go", &serde_json::json!(n))
                    .await
                    .expect("sent");
            }
            driver
                .signal(one_early, "go", &serde_json::json!(1))
                .await
                .expect("sent");
            driver.run_until_idle().await;
            driver.advance(Duration::from_mins(5));
            driver
                .signal(picky, "go", &serde_json::json!({"ok": false}))
                .await
                .expect("sent");
            driver.run_until_idle().await; // turned down: parks again, same deadline
            driver.advance(Duration::from_secs(299));
            driver.run_until_idle().await;
            assert_eq!(
                driver.view(picky).await.steps[0].status,
                StepStatus::Waiting,
                "9m59s after the first park"
            );
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await;
            driver
                .signal(one_early, "go", &serde_json::json!(2))
                .await
                .expect("sent");
            drive_driver(&driver).await;
            (driver, vec![picky, both_early, one_early])
        },
    )
    .await;
    let [picky, both_early, one_early] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(picky.status, RunStatus::Finished);
    assert_eq!(picky.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(picky.steps[0].waiting_since_ms, Some(0));
    assert_eq!(picky.steps[0].times_ms.2, Some(600_000), "timed out at 10m");
    assert_eq!(picky.signals[0].consumed_by, None);
    for run in [both_early, one_early] {
        assert_eq!(run.status, RunStatus::Finished);
        let outputs: Vec<Option<serde_json::Value>> =
            run.steps.iter().map(|s| s.output.clone()).collect();
        assert_eq!(
            outputs,
            [Some(serde_json::json!(1)), Some(serde_json::json!(2))]
        );
        let consumers: Vec<Option<usize>> = run.signals.iter().map(|g| g.consumed_by).collect();
        assert_eq!(consumers, [Some(0), Some(1)]);
    }
    assert!(!event_names(both_early).contains(&"step_waiting"));
    assert!(event_names(one_early).contains(&"step_waiting"));
}

/// Takes only `{"ok": true}` signals named `s`, counting every call of its
/// predicate; waits 10 minutes (`on_timeout` pause).
pub(super) struct Counted {
    calls: Arc<AtomicUsize>,
}

#[workflow(name = "diff.counted", input = u8, queue = "diff")]
impl Counted {
    fn ok(&self, _cx: &StepCx<u8>, signal: &Signal) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        signal.payload["ok"] == true
    }

    #[step(wait_for(name = "s", matches = ok), wait_timeout = "10m")]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

/// Sends `count` signals `s` that `Counted` turns down.
pub(super) async fn turned_down(driver: &Driver, run: RunId, count: usize) {
    for n in 0..count {
        driver
            .signal(run, "s", &serde_json::json!({"ok": false, "n": n}))
            .await
            .expect("sent");
    }
}

pub(super) fn count_events(projection: &Projection, event: &str) -> usize {
    event_names(projection)
        .iter()
        .filter(|e| **e == event)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // three runs through their pages, then the checks
async fn signal_pages_are_judged_once_and_the_timeout_waits_for_the_last_page_the_same_way() {
    let memory_calls = Arc::new(AtomicUsize::new(0));
    let pg_calls = Arc::new(AtomicUsize::new(0));
    let (memory_for_env, pg_for_worker) = (Arc::clone(&memory_calls), Arc::clone(&pg_calls));
    let projections = both_drivers(
        move |env| {
            env.register(Counted {
                calls: Arc::clone(&memory_for_env),
            })
        },
        move |worker| {
            worker.register(Counted {
                calls: pg_for_worker,
            })
        },
        |driver| {
            let calls = match &driver {
                Driver::Memory(_) => Arc::clone(&memory_calls),
                Driver::Postgres { .. } => Arc::clone(&pg_calls),
            };
            async move {
                let paged = driver.start::<Counted>(&1).await;
                let wins = driver.start::<Counted>(&2).await;
                let loses = driver.start::<Counted>(&3).await;
                driver.run_until_idle().await; // all three park
                assert_eq!(calls.load(Ordering::SeqCst), 0);

                // 20 turned down: pages of 8, 8 and 4, each signal judged once.
                turned_down(&driver, paged, 20).await;
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 20);
                assert_eq!(
                    driver.view(paged).await.steps[0].status,
                    StepStatus::Waiting
                );
                // The match that wakes it is the only signal judged.
                driver
                    .signal(paged, "s", &serde_json::json!({"ok": true}))
                    .await
                    .expect("sent");
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 21, "none judged twice");

                // Past the deadline before any claim looked: the match behind
                // two full pages wins; with none, the short last page times out.
                turned_down(&driver, wins, 20).await;
                driver
                    .signal(wins, "s", &serde_json::json!({"ok": true}))
                    .await
                    .expect("sent");
                turned_down(&driver, loses, 20).await;
                driver.advance(Duration::from_secs(601));
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 21 + 21 + 20);
                (driver, vec![paged, wins, loses])
            }
        },
    )
    .await;
    assert_eq!(memory_calls.load(Ordering::SeqCst), 62);
    assert_eq!(pg_calls.load(Ordering::SeqCst), 62);

    let [paged, wins, loses] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(paged.status, RunStatus::Finished);
    assert_eq!(paged.steps.len(), 1, "one attempt");
    assert_eq!(paged.steps[0].output, Some(serde_json::json!({"ok": true})));
    // Parked with nothing, after each page; claimed once more for the match.
    assert_eq!(count_events(paged, "step_waiting"), 4);
    assert_eq!(count_events(paged, "step_started"), 5);
    let consumed: Vec<Option<usize>> = paged.signals.iter().map(|g| g.consumed_by).collect();
    let mut expected = vec![None; 20];
    expected.push(Some(0));
    assert_eq!(consumed, expected, "the 20 turned down stay unconsumed");

    assert_eq!(wins.status, RunStatus::Finished);
    assert_eq!(wins.steps[0].output, Some(serde_json::json!({"ok": true})));
    assert_eq!(count_events(wins, "wait_timed_out"), 0);
    assert_eq!(count_events(wins, "signal_consumed"), 1);
    assert_eq!(wins.signals[20].consumed_by, Some(0));
    assert_eq!(count_events(wins, "step_waiting"), 3);

    assert_eq!(loses.status, RunStatus::Paused);
    assert!(
        loses.steps[0]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("WaitTimedOut"))
    );
    assert_eq!(count_events(loses, "wait_timed_out"), 1);
    assert_eq!(count_events(loses, "step_waiting"), 3);
    assert!(loses.signals.iter().all(|g| g.consumed_by.is_none()));
}

// ---- a fan_out parent's claim lost with its worker -------------------------------

/// `on_timeout = "run"` with a reattempt policy: a body that finds no signal
/// fails, and is reattempted once.
pub(super) struct RunRetry;

#[workflow(name = "diff.run_retry", input = u8, queue = "diff")]
impl RunRetry {
    #[step(
        wait_for = "go",
        wait_timeout = "10m",
        on_timeout = "run",
        on_exception(matching(Flaky), action = "reattempt", wait = "1s", max_reattempts = 1)
    )]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        let Some(payload) = cx.signal().map(|s| s.payload.clone()) else {
            return Err(StepError::from(Flaky(cx.attempt())));
        };
        cx.output(&payload)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_its_timeout_again_and_a_resume_waits_afresh_the_same_way() {
    let projections = both_drivers(
        |env| env.register(RunRetry).register(TimeoutPause),
        |worker| worker.register(RunRetry).register(TimeoutPause),
        |driver| async move {
            let retry = driver.start::<RunRetry>(&1).await;
            let paused = driver.start::<TimeoutPause>(&1).await;
            driver.run_until_idle().await;
            driver.advance(Duration::from_mins(10));
            driver.run_until_idle().await;
            // Sent after each timeout was decided.
            driver
                .signal(retry, "go", &serde_json::json!("late"))
                .await
                .expect("sent");
            driver
                .signal(paused, "go", &serde_json::json!("while paused"))
                .await
                .expect("sent");
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await;
            let view = driver.view(retry).await;
            assert_eq!(view.run.status, RunStatus::Paused, "reattempts used up");
            assert_eq!(view.signals[0].consumed_by, None);
            driver.advance(Duration::from_mins(1));
            for run in [retry, paused] {
                assert_eq!(
                    driver.act(run, Action::Resume, "go on").await,
                    Ok(RunStatus::Ready)
                );
            }
            drive_driver(&driver).await;
            (driver, vec![retry, paused])
        },
    )
    .await;
    let [retry, paused] = &projections[..] else {
        unreachable!()
    };
    let timed_out: Vec<Option<i32>> = retry
        .events
        .iter()
        .filter(|e| e.0 == "wait_timed_out")
        .map(|e| e.2)
        .collect();
    assert_eq!(
        timed_out,
        [Some(1), Some(2)],
        "the reattempt timed out again"
    );
    let rows: Vec<(i32, Option<StepOutcome>)> = retry
        .steps
        .iter()
        .filter(|s| s.name == "wait")
        .map(|s| (s.attempt, s.outcome))
        .collect();
    assert_eq!(
        rows,
        [
            (1, Some(StepOutcome::Reattempted)),
            (2, Some(StepOutcome::Paused)),
            (3, Some(StepOutcome::Completed)),
        ]
    );
    assert!(
        retry.steps[1]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("Flaky")),
        "attempt 2's body ran without a signal"
    );
    assert_eq!(retry.status, RunStatus::Finished);
    assert_eq!(retry.steps[2].output, Some(serde_json::json!("late")));
    assert_eq!(retry.steps[2].waiting_since_ms, None, "it never parked");
    assert_eq!(
        retry.signals[0].consumed_by,
        Some(2),
        "by the resumed attempt"
    );

    assert_eq!(paused.status, RunStatus::Finished);
    assert_eq!(count_events(paused, "wait_timed_out"), 1);
    assert_eq!(
        paused.steps[1].output,
        Some(serde_json::json!("while paused"))
    );
    assert_eq!(paused.steps[1].waiting_since_ms, None, "it never parked");
    assert_eq!(paused.signals[0].consumed_by, Some(1));
}
