//! Crashed workers, sweeps, retention and races with a running step.

use super::fan_out::{FanPause, child, fan};
use super::verbs::{Gate, Gated};
use super::*;
use pgbus_runtime::FailureAction;

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

/// A worker dies in `work`'s body; the sweep leaves it alone until `silence`
/// has passed, then repairs it once.
async fn crash<R: Rig>(
    h: &Harness<R>,
    entered: &tokio::sync::Notify,
    silence: Duration,
) -> Vec<RunId> {
    let run = h.start::<Fragile>(&1).await;
    h.crash_next(entered).await;
    h.advance(silence.saturating_sub(Duration::from_secs(2)));
    assert_eq!(h.sweep().await, (0, 0), "not yet");
    h.advance(Duration::from_secs(2));
    assert_eq!(h.sweep().await, (1, 0));
    assert_eq!(h.sweep().await, (0, 0), "repaired once");
    drive(h).await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_is_swept_the_same_way() {
    // Lost worker (30 s of silence), reattempted; and past the step's timeout
    // (the lost-worker threshold set beyond it), paused, then resumed.
    for (action, silence, lost_after, expected) in [
        (
            StallAction::reattempt(Duration::from_secs(10)),
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
        let projections = both!(
            |h| h
                .stall_action(action)
                .lost_worker_threshold(lost_after)
                .register(Fragile {
                    entered: Arc::clone(&entered),
                }),
            crash(&entered, silence)
        );
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

/// `work` hangs on every attempt (after saying so).
struct Doomed {
    entered: Arc<tokio::sync::Notify>,
}

#[workflow(name = "diff.doomed", input = u8)]
impl Doomed {
    #[step(timeout = "1m")]
    async fn work(&self, _cx: &mut StepCx<u8>) {
        self.entered.notify_one();
        std::future::pending::<()>().await;
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

/// `work` stalls past its timeout three times in a row, each in a worker that
/// dies with it.
async fn stall_thrice<R: Rig>(h: &Harness<R>, entered: &tokio::sync::Notify) -> Vec<RunId> {
    let run = h.start::<Doomed>(&1).await;
    for attempt in 1..=3 {
        h.crash_next(entered).await;
        h.advance(Duration::from_secs(61));
        assert_eq!(h.sweep().await, (1, 0), "attempt {attempt}");
    }
    drive(h).await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_reattempt_is_bounded_the_same_way() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let projections = both!(
        |h| h
            .stall_action(StallAction::Reattempt {
                wait: Duration::ZERO,
                max_reattempts: 2,
                terminal_action: FailureAction::Skip,
            })
            .lost_worker_threshold(Duration::from_mins(10))
            .register(Doomed {
                entered: Arc::clone(&entered),
            }),
        stall_thrice(&entered)
    );
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Finished, "skipped, then `after` ran");
    let stalls = run.events.iter().filter(|e| e.0 == "stall_detected");
    assert_eq!(stalls.count(), 3, "no fourth attempt");
}

/// Two ended runs and a paused one; retention deletes the old ended one only.
async fn retention<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let finished = h.start::<Verbs>(&script("finish")).await;
    let paused = h.start::<Verbs>(&script("pause")).await;
    h.run_until_idle().await;
    h.advance(pgbus_runtime::worker::DEFAULT_RETENTION);
    assert_eq!(h.sweep().await, (0, 0), "exactly the retention: kept");
    h.advance(Duration::from_secs(1));
    let later = h.start::<Verbs>(&script("finish")).await;
    h.run_until_idle().await;
    assert_eq!(h.sweep().await, (0, 1));
    assert!(!h.exists(finished).await);
    assert!(h.exists(paused).await, "only ended runs go");
    assert!(h.exists(later).await, "a recent run stays");
    vec![paused, later]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_same_runs() {
    both!(|h| h.register(Verbs), retention());
}

/// An operator acts while `hold`'s body runs.
async fn act_mid_step<R: Rig>(h: &Harness<R>, gate: &Gate, action: Action) -> Vec<RunId> {
    let run = h.start::<Gated>(&1).await;
    let running = h.spawn_next();
    gate.entered.notified().await;
    h.act(run, action, "mid-step").await.expect("legal");
    gate.release.notify_one();
    running.await.expect("join");
    h.run_until_idle().await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_cancel_during_a_step_race_the_same_way() {
    for action in [Action::Pause, Action::Cancel] {
        let gate = Arc::new(Gate::default());
        let projections = both!(
            |h| h.register(Gated {
                gate: Arc::clone(&gate),
            }),
            act_mid_step(&gate, action)
        );
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
pub(super) async fn sweep_and_resume<R: Rig>(h: &Harness<R>, runs: &[RunId]) {
    h.advance(Duration::from_secs(31));
    assert_eq!(h.sweep().await, (runs.len(), 0));
    for run in runs {
        assert_eq!(h.view(*run).await.run.status, RunStatus::Paused);
        assert_eq!(
            h.act(*run, Action::Resume, "the worker is gone").await,
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

/// Two parents whose batch resolved (one succeeded, one failed): each parent's
/// woken row is claimed by a worker that dies.
async fn crash_after_a_batch<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let succeeded = h
        .start::<FanPause>(&vec![child("finish"), child("hold")])
        .await;
    let failed = h
        .start::<FanPause>(&vec![child("cancel"), child("hold")])
        .await;
    h.run_until_idle().await;
    for parent in [succeeded, failed] {
        let kids = h.children(parent).await;
        h.signal(kids[1], "release", &serde_json::json!(null))
            .await
            .expect("sent");
        h.run_one().await; // the last child ends: its batch wakes the parent
        assert_eq!(h.view(parent).await.steps[0].status, StepStatus::Scheduled);
        assert_eq!(h.claim_and_die().await, parent);
    }
    sweep_and_resume(h, &[succeeded, failed]).await;
    drive(h).await;
    vec![succeeded, failed]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_batch_resolved_is_swept_and_resumed_the_same_way() {
    let projections = both!(|h| fan(h), crash_after_a_batch());
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

/// A parked fan_out row comes due while a child still waits; its worker dies, and
/// the resumed attempt takes the open batch over.
async fn take_over<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let parent = h
        .start::<FanPause>(&vec![child("finish"), child("hold")])
        .await;
    h.run_one().await; // parks
    h.advance(Duration::from_secs(1));
    h.run_until_idle().await; // one child finishes, the other waits
    // The parked row comes due at the end of its longest wait while a
    // child still waits; a worker claims it and dies.
    h.advance(Duration::from_millis(pgbus_runtime::MAX_DURATION_MS));
    assert_eq!(h.claim_and_die().await, parent);
    sweep_and_resume(h, &[parent]).await;
    h.run_until_idle().await;
    let view = h.view(parent).await;
    assert_eq!(view.steps[1].status, StepStatus::Waiting);
    assert_eq!(
        view.batches[0].parent_step_id, view.steps[1].id,
        "taken over"
    );
    let kids = h.children(parent).await;
    h.signal(kids[1], "release", &serde_json::json!(null))
        .await
        .expect("sent");
    drive(h).await;
    vec![parent]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_attempt_takes_over_an_open_batch_the_same_way() {
    let projections = both!(|h| fan(h.retention(None)), take_over());
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
