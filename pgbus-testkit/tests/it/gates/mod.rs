//! The environment with the steps that wait: a `wait_for` step tested with
//! `env.signal(..)` and timeouts on the virtual clock, and a `fan_out` step with
//! its child runs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunFilter, RunStatus, StepOutcome, StepStatus};
use pgbus_testkit::{TestEnv, default_start};

// ---- a signal step ----------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Settled {
    order: u32,
    cents: u64,
}

struct Checkout;

#[workflow(name = "shop.checkout", input = u32)]
impl Checkout {
    fn for_this_order(&self, cx: &StepCx<u32>, signal: &Signal) -> bool {
        signal.payload["order"] == *cx.input()
    }

    #[step]
    async fn reserve(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&format!("reserved for order {}", cx.input()))?;
        Ok(Flow::Complete)
    }

    #[step(
        wait_for(name = "payment.settled", matches = for_this_order),
        wait_timeout = "1h",
        on_timeout = "cancel"
    )]
    async fn await_payment(&self, cx: &mut StepCx<u32>) -> StepResult {
        let settled: Settled = cx
            .signal()
            .expect("the gate passed a signal")
            .payload_as()?;
        cx.output(&settled.cents)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_signal_step_waits_and_the_signal_lets_it_through() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&7).unwrap().run_id;
    let reserved = env.run_next().await.unwrap();
    assert_eq!(reserved.outcome, Some(StepOutcome::Completed));

    // No signal yet: the attempt parks; it has no outcome.
    let parked = env.run_next().await.unwrap();
    assert_eq!(parked.step, "await_payment");
    assert_eq!(parked.outcome, None);
    assert_eq!(parked.status, StepStatus::Waiting);
    assert_eq!(
        parked.run_status,
        RunStatus::Ready,
        "a waiting run is ready"
    );
    let view = env.run(run).unwrap();
    let waiting = &view.steps[1];
    assert_eq!(waiting.waiting_for.as_deref(), Some("payment.settled"));
    assert_eq!(waiting.waiting_since, Some(default_start()));
    assert!(env.run_until_idle().await.is_empty(), "nothing is due");

    // Another order's payment: the predicate turns it down, the step waits on.
    env.advance(Duration::from_mins(5));
    env.signal(
        run,
        "payment.settled",
        &Settled {
            order: 8,
            cents: 100,
        },
    )
    .unwrap();
    let again = env.run_next().await.unwrap();
    assert_eq!((again.attempt, again.outcome), (1, None), "same attempt");
    assert_eq!(again.status, StepStatus::Waiting);

    env.advance(Duration::from_mins(5));
    env.signal(
        run,
        "payment.settled",
        &Settled {
            order: 7,
            cents: 4_200,
        },
    )
    .unwrap();
    let records = env.run_to_completion().await;
    let steps: Vec<(&str, Option<StepOutcome>)> = records
        .iter()
        .map(|r| (r.step.as_str(), r.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("await_payment", Some(StepOutcome::Completed)),
            ("ship", Some(StepOutcome::Completed)),
        ]
    );
    assert_eq!(records[0].output, Some(serde_json::json!(4_200)));
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    let consumed: Vec<Option<i64>> = view.signals.iter().map(|s| s.consumed_by).collect();
    assert_eq!(
        consumed,
        [None, Some(view.steps[1].id)],
        "the other order's payment stays unconsumed"
    );
    let events: Vec<&str> = view.events.iter().map(|e| e.event.as_str()).collect();
    assert!(events.contains(&"signal_consumed"));
    assert_eq!(
        (env.now() - default_start()).num_minutes(),
        10,
        "no waiting in real time"
    );
}

#[tokio::test]
async fn a_signal_sent_before_the_wait_is_taken_at_once() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&1).unwrap().run_id;
    env.signal(run, "payment.settled", &Settled { order: 1, cents: 5 })
        .unwrap();
    let records = env.run_until_idle().await;
    assert!(
        records.iter().all(|r| r.outcome.is_some()),
        "nothing parked"
    );
    assert_eq!(env.run(run).unwrap().run.status, RunStatus::Finished);
}

#[tokio::test]
async fn the_wait_times_out_when_the_clock_says_so() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&3).unwrap().run_id;
    env.run_until_idle().await;
    env.advance(Duration::from_secs(3_599));
    assert!(
        env.run_until_idle().await.is_empty(),
        "59m59s is not an hour"
    );

    env.advance(Duration::from_secs(1));
    let timed_out = env.run_next().await.unwrap();
    assert_eq!(timed_out.outcome, Some(StepOutcome::Cancelled));
    assert_eq!(timed_out.status, StepStatus::Failed);
    let error = timed_out.error.unwrap();
    assert!(error.class.ends_with("WaitTimedOut"), "{}", error.class);
    assert_eq!(
        error.message,
        "step `await_payment` waited 1h for signal `payment.settled`, which did not come"
    );
    assert_eq!(timed_out.run_status, RunStatus::Cancelled);
    assert!(matches!(
        env.signal(run, "payment.settled", &()),
        Err(Error::RunEnded { .. })
    ));
}

#[tokio::test]
async fn run_to_completion_reaches_a_timeout_but_leaves_an_open_wait_waiting() {
    let env = TestEnv::new().register(Checkout).register(Openended);
    let timed = env.start::<Checkout>(&3).unwrap().run_id;
    let open = env.start::<Openended>(&()).unwrap().run_id;
    let records = env.run_to_completion().await;
    assert_eq!(records.len(), 4, "reserve, park, timeout; and one park");
    assert_eq!(env.run(timed).unwrap().run.status, RunStatus::Cancelled);
    assert_eq!(
        (env.now() - default_start()).num_minutes(),
        60,
        "the clock went to the timeout, and no further"
    );
    let view = env.run(open).unwrap();
    assert_eq!(view.steps[0].status, StepStatus::Waiting);
    env.signal(open, "go", &()).unwrap();
    env.run_to_completion().await;
    assert_eq!(env.run(open).unwrap().run.status, RunStatus::Finished);
}

/// Waits for `go` with no timeout.
struct Openended;

#[workflow(name = "shop.openended")]
impl Openended {
    #[step(wait_for = "go")]
    async fn wait(&self, _cx: &mut StepCx<()>) {}
}

// ---- a fan_out step ---------------------------------------------------------------

/// Bills each line in a child run, then sends the invoice.
struct Invoice;

#[workflow(name = "billing.invoice", input = Vec<u32>)]
impl Invoice {
    #[fan_out]
    async fn bill_lines(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        for cents in cx.input().clone() {
            fan.start::<BillLine>(&cents)?;
        }
        cx.output(&fan.len())?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn send(&self, _cx: &mut StepCx<Vec<u32>>) {}
}

/// A line of zero is cancelled; one over 1,000 waits for an `approved` signal.
struct BillLine;

#[workflow(name = "billing.line", input = u32)]
impl BillLine {
    #[step]
    async fn check(&self, cx: &mut StepCx<u32>) -> Flow {
        match *cx.input() {
            0 => Flow::cancel("nothing to bill"),
            cents if cents > 1_000 => Flow::Complete,
            _ => Flow::Finish,
        }
    }

    #[step(wait_for = "approved")]
    async fn approve(&self, _cx: &mut StepCx<u32>) {}
}

fn billing() -> TestEnv {
    TestEnv::new().register(Invoice).register(BillLine)
}

/// The children of `run`'s batches, oldest first.
fn children(env: &TestEnv, run: RunId) -> Vec<RunId> {
    let batches: Vec<i64> = env.run(run).unwrap().batches.iter().map(|b| b.id).collect();
    let mut kids: Vec<RunId> = env
        .list_runs(&RunFilter::default())
        .unwrap()
        .into_iter()
        .filter(|summary| {
            env.run(summary.id)
                .unwrap()
                .parent_batch_id
                .is_some_and(|batch| batches.contains(&batch))
        })
        .map(|summary| summary.id)
        .collect();
    kids.sort();
    kids
}

#[tokio::test]
async fn a_fan_out_step_waits_for_its_children() {
    let env = billing();
    let run = env.start::<Invoice>(&vec![100, 2_000, 300]).unwrap().run_id;
    let parked = env.run_next().await.unwrap();
    assert_eq!(parked.step, "bill_lines");
    assert_eq!((parked.outcome, parked.status), (None, StepStatus::Waiting));
    assert_eq!(parked.output, Some(serde_json::json!(3)));

    env.run_until_idle().await; // the children: two finish, one waits
    let kids = children(&env, run);
    assert_eq!(kids.len(), 3);
    let batch = &env.run(run).unwrap().batches[0];
    assert_eq!((batch.finished, batch.status.as_str()), (2, "open"));
    assert_eq!(env.sweep().batches_resolved, 0, "nothing stuck");

    env.signal(kids[1], "approved", &()).unwrap();
    let records = env.run_until_idle().await;
    let steps: Vec<(&str, Option<StepOutcome>)> = records
        .iter()
        .map(|r| (r.step.as_str(), r.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("approve", Some(StepOutcome::Completed)),
            ("bill_lines", Some(StepOutcome::Completed)),
            ("send", Some(StepOutcome::Completed)),
        ],
        "the last child wakes the parent"
    );
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.batches[0].status, "succeeded");
    assert!(view.events.iter().any(|e| e.event == "batch_resolved"));
}

#[tokio::test]
async fn a_cancelled_child_pauses_the_parent_and_resume_starts_a_fresh_batch() {
    let env = billing();
    let run = env.start::<Invoice>(&vec![0, 100]).unwrap().run_id;
    env.run_until_idle().await;
    let view = env.run(run).unwrap();
    assert_eq!(
        view.run.status,
        RunStatus::Paused,
        "default on_batch_failure"
    );
    assert!(
        view.error_class
            .as_deref()
            .is_some_and(|class| class.ends_with("FanOutFailed"))
    );
    assert_eq!(
        view.error_message.as_deref(),
        Some("fan_out step `bill_lines`: 1 of 2 child runs were cancelled (1 finished)")
    );

    env.resume(run, "ops", "try again").unwrap();
    let retried = env.run_next().await.unwrap();
    assert_eq!((retried.attempt, retried.outcome), (2, None));
    env.run_until_idle().await;
    let view = env.run(run).unwrap();
    assert_eq!(view.batches.len(), 2, "a fresh batch");
    assert_eq!(children(&env, run).len(), 4);
    assert_eq!(
        view.run.status,
        RunStatus::Paused,
        "the same input fails again"
    );
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_children_still_running() {
    let env = billing();
    let run = env.start::<Invoice>(&vec![5_000, 6_000, 7]).unwrap().run_id;
    env.run_until_idle().await;
    env.cancel(run, "ops", "order withdrawn").unwrap();
    let statuses: Vec<RunStatus> = children(&env, run)
        .into_iter()
        .map(|kid| env.run(kid).unwrap().run.status)
        .collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Cancelled,
            RunStatus::Cancelled,
            RunStatus::Finished
        ]
    );
    assert!(env.run_to_completion().await.is_empty());
}

// ---- a fan_out parent's claim lost with its worker -------------------------------

/// Bills each line in a child run on its first attempt (lines of 1 cent on a
/// later one), counting how often its body runs.
struct Rebill {
    bodies: Arc<AtomicU32>,
}

#[workflow(name = "billing.rebill", input = Vec<u32>)]
impl Rebill {
    #[fan_out]
    async fn bill_lines(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        self.bodies.fetch_add(1, Ordering::SeqCst);
        for cents in cx.input().clone() {
            fan.start::<BillLine>(&if cx.attempt() == 1 { cents } else { 1 })?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn send(&self, _cx: &mut StepCx<Vec<u32>>) {}
}

/// An environment with `Rebill` counting into `bodies`; finished runs are kept
/// however far the clock goes.
fn rebilling(bodies: &Arc<AtomicU32>) -> TestEnv {
    TestEnv::new()
        .retention(None)
        .register(Rebill {
            bodies: Arc::clone(bodies),
        })
        .register(BillLine)
}

/// Past the lost-worker threshold, the sweep pauses the run whose attempt a
/// crashed worker held (`StepStalled`); an operator resumes it.
fn sweep_and_resume(env: &TestEnv, run: RunId) {
    env.advance(Duration::from_secs(31));
    assert_eq!(env.sweep().repaired, 1);
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        (view.steps[0].status, view.steps[0].outcome),
        (StepStatus::Failed, Some(StepOutcome::Paused))
    );
    assert!(
        view.error_class
            .as_deref()
            .is_some_and(|class| class.ends_with("StepStalled")),
        "{:?}",
        view.error_class
    );
    let stalled: Vec<Option<&str>> = view
        .events
        .iter()
        .filter(|e| e.event == "stall_detected")
        .map(|e| e.reason.as_deref())
        .collect();
    assert_eq!(stalled, [Some("worker_lost")]);
    assert_eq!(
        env.resume(run, "ops", "the worker is gone").unwrap(),
        RunStatus::Ready
    );
}

#[tokio::test]
async fn a_crash_after_the_batch_resolved_starts_a_second_batch_only_if_it_failed() {
    // (lines, batches afterwards, body runs)
    for (lines, batches, body_runs) in [(vec![100, 200], 1, 1), (vec![0, 200], 2, 2)] {
        let bodies = Arc::new(AtomicU32::new(0));
        let env = rebilling(&bodies);
        let run = env.start::<Rebill>(&lines).unwrap().run_id;
        let parked = env.run_next().await.unwrap();
        assert_eq!((parked.step.as_str(), parked.outcome), ("bill_lines", None));
        for _ in 0..2 {
            assert_eq!(env.run_next().await.unwrap().workflow, "billing.line");
        }
        let view = env.run(run).unwrap();
        assert_eq!(view.steps[0].status, StepStatus::Scheduled, "woken");
        let resolved = if batches == 1 { "succeeded" } else { "failed" };
        assert_eq!(view.batches[0].status, resolved);

        // The wake's claim is taken by a worker that dies at once.
        assert_eq!(env.crash_next(), Some(run));
        assert!(env.run_until_idle().await.is_empty(), "{lines:?}");
        sweep_and_resume(&env, run);
        let records = env.run_to_completion().await;
        let parent: Vec<(&str, i32, Option<StepOutcome>)> = records
            .iter()
            .filter(|r| r.run_id == run)
            .map(|r| (r.step.as_str(), r.attempt, r.outcome))
            .collect();
        if batches == 1 {
            assert_eq!(
                parent,
                [
                    ("bill_lines", 2, Some(StepOutcome::Completed)),
                    ("send", 1, Some(StepOutcome::Completed)),
                ],
                "the resolved batch decides: the body does not run again"
            );
        } else {
            assert_eq!(
                parent,
                [
                    ("bill_lines", 2, None),
                    ("bill_lines", 2, Some(StepOutcome::Completed)),
                    ("send", 1, Some(StepOutcome::Completed)),
                ],
                "a failed batch is not taken over: a fresh one"
            );
        }

        let view = env.run(run).unwrap();
        assert_eq!(view.run.status, RunStatus::Finished, "{lines:?}");
        assert_eq!(view.batches.len(), batches, "{lines:?}");
        assert_eq!(view.batches[0].parent_step_id, view.steps[0].id);
        assert_eq!(
            view.batches.last().unwrap().parent_step_id,
            view.steps[batches - 1].id
        );
        assert_eq!(children(&env, run).len(), 2 * batches, "{lines:?}");
        assert_eq!(bodies.load(Ordering::SeqCst), body_runs, "{lines:?}");
        assert!(
            !view
                .events
                .iter()
                .any(|e| e.event == "late_completion_ignored")
        );
    }
}

#[tokio::test]
async fn a_new_attempt_takes_over_the_open_batch_and_its_last_child_wakes_it() {
    let bodies = Arc::new(AtomicU32::new(0));
    let env = rebilling(&bodies);
    let run = env.start::<Rebill>(&vec![100, 2_000]).unwrap().run_id;
    assert_eq!(env.run_next().await.unwrap().outcome, None, "parks");
    env.advance(Duration::from_secs(1));
    env.run_until_idle().await; // one child finishes, the other waits
    let kids = children(&env, run);
    let view = env.run(run).unwrap();
    let first = view.steps[0].id;
    assert_eq!(
        (view.batches[0].finished, view.batches[0].status.as_str()),
        (1, "open")
    );

    // The parked row comes due at the end of its longest wait while a child
    // still waits; a worker claims it and dies.
    env.advance(Duration::from_millis(pgbus_runtime::MAX_DURATION_MS));
    assert_eq!(env.crash_next(), Some(run));
    sweep_and_resume(&env, run);
    assert_eq!(env.run(run).unwrap().batches[0].status, "open");

    // The new attempt takes the open batch over instead of running the body.
    let records = env.run_until_idle().await;
    let parent: Vec<(i32, Option<StepOutcome>, StepStatus)> = records
        .iter()
        .filter(|r| r.run_id == run)
        .map(|r| (r.attempt, r.outcome, r.status))
        .collect();
    assert_eq!(parent, [(2, None, StepStatus::Waiting)]);
    let view = env.run(run).unwrap();
    let second = view.steps[1].id;
    assert_ne!(first, second);
    assert_eq!(view.batches.len(), 1, "no second batch");
    assert_eq!(
        view.batches[0].parent_step_id, second,
        "the batch now wakes the new attempt"
    );
    assert_eq!(bodies.load(Ordering::SeqCst), 1);

    // The last child ends: its batch wakes the new row, which completes.
    env.signal(kids[1], "approved", &()).unwrap();
    let records = env.run_until_idle().await;
    let steps: Vec<(&str, i32, Option<StepOutcome>)> = records
        .iter()
        .map(|r| (r.step.as_str(), r.attempt, r.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("approve", 1, Some(StepOutcome::Completed)),
            ("bill_lines", 2, Some(StepOutcome::Completed)),
            ("send", 1, Some(StepOutcome::Completed)),
        ]
    );
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        (
            view.batches[0].parent_step_id,
            view.batches[0].status.as_str(),
            view.batches[0].finished
        ),
        (second, "succeeded", 2)
    );
    let resolved: Vec<Option<i64>> = view
        .events
        .iter()
        .filter(|e| e.event == "batch_resolved")
        .map(|e| e.step_id)
        .collect();
    assert_eq!(resolved, [Some(second)]);
    assert_eq!(children(&env, run).len(), 2);
    assert_eq!(bodies.load(Ordering::SeqCst), 1, "the body ran once");
}

// ---- a reattempt of a wait that timed out -------------------------------------------

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
