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

/// A predicate turns a signal down halfway through a wait; two waits for one
/// name, their signals sent early or not.
async fn turned_down_and_two_waits<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let picky = h.start::<PickyTimeout>(&1).await;
    let both_early = h.start::<TwoWaits>(&2).await;
    let one_early = h.start::<TwoWaits>(&3).await;
    for n in [1, 2] {
        h.signal(both_early, "go", &serde_json::json!(n))
            .await
            .expect("sent");
    }
    h.signal(one_early, "go", &serde_json::json!(1))
        .await
        .expect("sent");
    h.run_until_idle().await;
    h.advance(Duration::from_mins(5));
    h.signal(picky, "go", &serde_json::json!({"ok": false}))
        .await
        .expect("sent");
    h.run_until_idle().await; // turned down: parks again, same deadline
    h.advance(Duration::from_secs(299));
    h.run_until_idle().await;
    assert_eq!(
        h.view(picky).await.steps[0].status,
        StepStatus::Waiting,
        "9m59s after the first park"
    );
    h.advance(Duration::from_secs(1));
    h.run_until_idle().await;
    h.signal(one_early, "go", &serde_json::json!(2))
        .await
        .expect("sent");
    drive(h).await;
    vec![picky, both_early, one_early]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turned_down_signal_does_not_restart_the_timeout_and_each_wait_takes_its_own() {
    let projections = both!(
        |h| h.register(PickyTimeout).register(TwoWaits),
        turned_down_and_two_waits()
    );
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
pub(super) async fn turned_down<R: Rig>(h: &Harness<R>, run: RunId, count: usize) {
    for n in 0..count {
        h.signal(run, "s", &serde_json::json!({"ok": false, "n": n}))
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

/// Three runs wait through pages of turned-down signals; `calls` counts every
/// judgement of the predicate.
async fn signal_pages<R: Rig>(h: &Harness<R>, calls: &AtomicUsize) -> Vec<RunId> {
    let paged = h.start::<Counted>(&1).await;
    let wins = h.start::<Counted>(&2).await;
    let loses = h.start::<Counted>(&3).await;
    h.run_until_idle().await; // all three park
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // 20 turned down: pages of 8, 8 and 4, each signal judged once.
    turned_down(h, paged, 20).await;
    h.run_until_idle().await;
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    assert_eq!(h.view(paged).await.steps[0].status, StepStatus::Waiting);
    // The match that wakes it is the only signal judged.
    h.signal(paged, "s", &serde_json::json!({"ok": true}))
        .await
        .expect("sent");
    h.run_until_idle().await;
    assert_eq!(calls.load(Ordering::SeqCst), 21, "none judged twice");

    // Past the deadline before any claim looked: the match behind
    // two full pages wins; with none, the short last page times out.
    turned_down(h, wins, 20).await;
    h.signal(wins, "s", &serde_json::json!({"ok": true}))
        .await
        .expect("sent");
    turned_down(h, loses, 20).await;
    h.advance(Duration::from_secs(601));
    h.run_until_idle().await;
    assert_eq!(calls.load(Ordering::SeqCst), 21 + 21 + 20);
    vec![paged, wins, loses]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_pages_are_judged_once_and_the_timeout_waits_for_the_last_page_the_same_way() {
    // One count, set back to 0 as each store's harness is set up: the scenario
    // checks each store's count (62 at its end) before the next one starts.
    let calls = Arc::new(AtomicUsize::new(0));
    let projections = both!(
        |h| {
            calls.store(0, Ordering::SeqCst);
            h.register(Counted {
                calls: Arc::clone(&calls),
            })
        },
        signal_pages(&calls)
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        62,
        "Postgres's count, after the memory store's 62: nothing judged since"
    );

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

/// Two waits time out; signals come after, while one reattempts and the other
/// is paused.
async fn timeout_again<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let retry = h.start::<RunRetry>(&1).await;
    let paused = h.start::<TimeoutPause>(&1).await;
    h.run_until_idle().await;
    h.advance(Duration::from_mins(10));
    h.run_until_idle().await;
    // Sent after each timeout was decided.
    h.signal(retry, "go", &serde_json::json!("late"))
        .await
        .expect("sent");
    h.signal(paused, "go", &serde_json::json!("while paused"))
        .await
        .expect("sent");
    h.advance(Duration::from_secs(1));
    h.run_until_idle().await;
    let view = h.view(retry).await;
    assert_eq!(view.run.status, RunStatus::Paused, "reattempts used up");
    assert_eq!(view.signals[0].consumed_by, None);
    h.advance(Duration::from_mins(1));
    for run in [retry, paused] {
        assert_eq!(
            h.act(run, Action::Resume, "go on").await,
            Ok(RunStatus::Ready)
        );
    }
    drive(h).await;
    vec![retry, paused]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_its_timeout_again_and_a_resume_waits_afresh_the_same_way() {
    let projections = both!(
        |h| h.register(RunRetry).register(TimeoutPause),
        timeout_again()
    );
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
