//! Crashed workers, sweeps, retention and races with a running step.

use super::fan_out::{FanPause, child, fan_env, fan_worker};
use super::verbs::{Gate, Gated};
use super::*;

/// `work` hangs on its first attempt (after saying so), for a worker to die in.
pub(super) struct Fragile {
    entered: Arc<tokio::sync::Notify>,
}

#[workflow(name = "diff.fragile", input = u8)]
impl Fragile {
    #[step(timeout = "1m")]
    async fn work(&self, cx: &mut StepCx<u8>) {
        if cx.attempt() == 1 {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_is_swept_the_same_way() {
    // Lost worker (30 s of silence), reattempted; and past the step's timeout
    // (the lost-worker threshold set beyond it), paused, then resumed.
    for (action, silence, lost_after, expected) in [
        (
            StallAction::Reattempt {
                wait: Duration::from_secs(10),
            },
            Duration::from_secs(31),
            Duration::from_secs(30),
            ("worker_lost", RunStatus::Finished),
        ),
        (
            StallAction::Pause,
            Duration::from_secs(61),
            Duration::from_mins(10),
            ("timeout", RunStatus::Paused),
        ),
    ] {
        let entered = Arc::new(tokio::sync::Notify::new());
        let projections = both_drivers(
            |env| {
                env.stall_action(action)
                    .lost_worker_threshold(lost_after)
                    .register(Fragile {
                        entered: Arc::clone(&entered),
                    })
            },
            |worker| {
                worker
                    .stall_action(action)
                    .lost_worker_threshold(lost_after)
                    .register(Fragile {
                        entered: Arc::clone(&entered),
                    })
            },
            |driver| {
                let entered = Arc::clone(&entered);
                async move {
                    let run = driver.start::<Fragile>(&1).await;
                    driver.crash_next(&entered).await;
                    driver.advance(silence.saturating_sub(Duration::from_secs(2)));
                    assert_eq!(driver.sweep().await, (0, 0), "not yet");
                    driver.advance(Duration::from_secs(2));
                    assert_eq!(driver.sweep().await, (1, 0));
                    assert_eq!(driver.sweep().await, (0, 0), "repaired once");
                    drive_driver(&driver).await;
                    (driver, vec![run])
                }
            },
        )
        .await;
        let run = &projections[0];
        assert_eq!(run.status, expected.1);
        let stall = run
            .events
            .iter()
            .find(|e| e.0 == "stall_detected")
            .expect("stall_detected");
        assert_eq!(stall.3.as_deref(), Some(expected.0));
        assert!(
            run.steps[0]
                .error
                .0
                .as_deref()
                .unwrap_or_default()
                .ends_with("StepStalled")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_same_runs() {
    both_drivers(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| async move {
            let finished = driver.start::<Verbs>(&script("finish")).await;
            let paused = driver.start::<Verbs>(&script("pause")).await;
            driver.run_until_idle().await;
            driver.advance(pgbus_runtime::worker::DEFAULT_RETENTION);
            assert_eq!(driver.sweep().await, (0, 0), "exactly the retention: kept");
            driver.advance(Duration::from_secs(1));
            let later = driver.start::<Verbs>(&script("finish")).await;
            driver.run_until_idle().await;
            assert_eq!(driver.sweep().await, (0, 1));
            assert!(!driver.exists(finished).await);
            assert!(driver.exists(paused).await, "only ended runs go");
            assert!(driver.exists(later).await, "a recent run stays");
            (driver, vec![paused, later])
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_cancel_during_a_step_race_the_same_way() {
    for action in [Action::Pause, Action::Cancel] {
        let gate = Arc::new(Gate::default());
        let projections = both_drivers(
            |env| {
                env.register(Gated {
                    gate: Arc::clone(&gate),
                })
            },
            |worker| {
                worker.register(Gated {
                    gate: Arc::clone(&gate),
                })
            },
            |driver| {
                let gate = Arc::clone(&gate);
                async move {
                    let run = driver.start::<Gated>(&1).await;
                    let running = driver.spawn_next();
                    gate.entered.notified().await;
                    driver.act(run, action, "mid-step").await.expect("legal");
                    gate.release.notify_one();
                    running.await.expect("join");
                    driver.run_until_idle().await;
                    (driver, vec![run])
                }
            },
        )
        .await;
        let run = &projections[0];
        let names: Vec<&str> = run.events.iter().map(|e| e.0.as_str()).collect();
        match action {
            Action::Pause => {
                assert_eq!(run.status, RunStatus::Paused, "held");
                assert_eq!(run.steps[1].status, StepStatus::Scheduled, "next row held");
            }
            _ => {
                assert_eq!(run.status, RunStatus::Cancelled);
                assert_eq!(run.steps.len(), 1, "no further step");
                assert_eq!(names.last(), Some(&"late_completion_ignored"));
            }
        }
    }
}

/// Past the lost-worker threshold, one sweep pauses every run whose attempt a
/// dead worker held; an operator resumes each.
pub(super) async fn sweep_and_resume(driver: &Driver, runs: &[RunId]) {
    driver.advance(Duration::from_secs(31));
    assert_eq!(driver.sweep().await, (runs.len(), 0));
    for run in runs {
        assert_eq!(driver.view(*run).await.run.status, RunStatus::Paused);
        assert_eq!(
            driver.act(*run, Action::Resume, "the worker is gone").await,
            Ok(RunStatus::Ready)
        );
    }
}

pub(super) fn stalled(projection: &Projection) -> bool {
    projection.steps[0]
        .error
        .0
        .as_deref()
        .is_some_and(|class| class.ends_with("StepStalled"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_batch_resolved_is_swept_and_resumed_the_same_way() {
    let projections = both_drivers(fan_env, fan_worker, |driver| async move {
        let succeeded = driver
            .start::<FanPause>(&vec![child("finish"), child("hold")])
            .await;
        let failed = driver
            .start::<FanPause>(&vec![child("cancel"), child("hold")])
            .await;
        driver.run_until_idle().await;
        for parent in [succeeded, failed] {
            let kids = driver.children(parent).await;
            driver
                .signal(kids[1], "release", &serde_json::json!(null))
                .await
                .expect("sent");
            driver.run_one().await; // the last child ends: its batch wakes the parent
            assert_eq!(
                driver.view(parent).await.steps[0].status,
                StepStatus::Scheduled
            );
            assert_eq!(driver.claim_and_die().await, parent);
        }
        sweep_and_resume(&driver, &[succeeded, failed]).await;
        drive_driver(&driver).await;
        (driver, vec![succeeded, failed])
    })
    .await;
    let [succeeded, failed] = &projections[..] else {
        unreachable!()
    };
    // The batch that succeeded decides the resumed attempt: no second batch,
    // and the body does not run (the attempt has no output of its own).
    assert_eq!(succeeded.status, RunStatus::Finished);
    assert!(stalled(succeeded));
    let rows: Vec<(&str, i32, Option<StepOutcome>)> = succeeded
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.attempt, s.outcome))
        .collect();
    assert_eq!(
        rows,
        [
            ("spread", 1, Some(StepOutcome::Paused)),
            ("spread", 2, Some(StepOutcome::Completed)),
            ("after", 1, Some(StepOutcome::Completed)),
        ]
    );
    assert_eq!(
        succeeded.steps[1].output,
        Some(serde_json::json!({"attempt": 1, "kids": 2})),
        "the body did not run again: attempt 2 keeps attempt 1's output"
    );
    assert_eq!(succeeded.batches.len(), 1);
    assert_eq!(succeeded.batches[0].parent_step, Some(0));
    assert_eq!(succeeded.batches[0].children.len(), 2);
    // The failed one is not taken over: the resumed attempt starts a fresh batch.
    assert!(stalled(failed));
    let batches: Vec<(Option<usize>, &str, usize)> = failed
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str(), b.children.len()))
        .collect();
    assert_eq!(batches, [(Some(0), "failed", 2), (Some(1), "open", 2)]);
    assert_eq!(
        failed.steps[1].output,
        Some(serde_json::json!({"kids": 2, "attempt": 2}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_attempt_takes_over_an_open_batch_the_same_way() {
    let projections = both_drivers(
        |env| fan_env(env.retention(None)),
        |worker| fan_worker(worker.retention(None)),
        |driver| async move {
            let parent = driver
                .start::<FanPause>(&vec![child("finish"), child("hold")])
                .await;
            driver.run_one().await; // parks
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await; // one child finishes, the other waits
            // The parked row comes due at the end of its longest wait while a
            // child still waits; a worker claims it and dies.
            driver.advance(Duration::from_millis(pgbus_runtime::MAX_DURATION_MS));
            assert_eq!(driver.claim_and_die().await, parent);
            sweep_and_resume(&driver, &[parent]).await;
            driver.run_until_idle().await;
            let view = driver.view(parent).await;
            assert_eq!(view.steps[1].status, StepStatus::Waiting);
            assert_eq!(
                view.batches[0].parent_step_id, view.steps[1].id,
                "taken over"
            );
            let kids = driver.children(parent).await;
            driver
                .signal(kids[1], "release", &serde_json::json!(null))
                .await
                .expect("sent");
            drive_driver(&driver).await;
            (driver, vec![parent])
        },
    )
    .await;
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Finished);
    assert!(stalled(parent));
    assert_eq!(parent.steps[1].outcome, Some(StepOutcome::Completed));
    assert_eq!(
        parent.steps[1].output,
        Some(serde_json::json!({"attempt": 1, "kids": 2})),
        "the body did not run again: attempt 2 keeps attempt 1's output"
    );
    let batches: Vec<(Option<usize>, &str, i32)> = parent
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str(), b.finished))
        .collect();
    assert_eq!(batches, [(Some(1), "succeeded", 2)]);
    let resolved = parent
        .events
        .iter()
        .find(|e| e.0 == "batch_resolved")
        .expect("batch_resolved");
    assert_eq!(resolved.2, Some(2), "it woke the new attempt");
}

// ---- a reattempt of a wait that timed out -------------------------------------------
