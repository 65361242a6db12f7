//! A fan_out step waiting for its child runs, and a fan_out parent's claim lost
//! with its worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{BatchStatus, RunFilter, RunStatus, StepOutcome, StepStatus};
use pgbus_testkit::TestEnv;

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
    assert_eq!(view.batches[0].status, BatchStatus::Succeeded);
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
    assert!(env.run_to_completion().await.unwrap().is_empty());
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
        let resolved = if batches == 1 {
            BatchStatus::Succeeded
        } else {
            BatchStatus::Failed
        };
        assert_eq!(view.batches[0].status, resolved);

        // The wake's claim is taken by a worker that dies at once.
        assert_eq!(env.crash_next(), Some(run));
        assert!(env.run_until_idle().await.is_empty(), "{lines:?}");
        sweep_and_resume(&env, run);
        let records = env.run_to_completion().await.unwrap();
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
    assert_eq!(env.run(run).unwrap().batches[0].status, BatchStatus::Open);

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
