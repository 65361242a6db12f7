//! Fan-out: batches, children, cascades and operators on parents.

use super::signals::event_names;
use super::*;

/// A child the parents start: `kids` for a nested fan_out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Kid {
    /// A [`Child`] with its verb.
    Child(String),
    /// A [`Middle`] that fans out to children with these verbs.
    Middle(Vec<String>),
}

pub(super) fn child(verb: &str) -> Kid {
    Kid::Child(verb.to_owned())
}

/// `act` by its verb (`finish`, `cancel`, `pause`; anything else goes on), then
/// `hold` waits for a `release` signal.
pub(super) struct Child;

#[workflow(name = "diff.child", input = String, queue = "diff")]
impl Child {
    #[step]
    async fn act(&self, cx: &mut StepCx<String>) -> Flow {
        match cx.input().as_str() {
            "finish" => Flow::Finish,
            "cancel" => Flow::cancel("the child gives up"),
            "pause" => Flow::pause("the child asks an operator"),
            _ => Flow::Complete,
        }
    }

    #[step(wait_for = "release")]
    async fn hold(&self, _cx: &mut StepCx<String>) {}
}

/// A child that fans out in turn.
pub(super) struct Middle;

#[workflow(name = "diff.middle", input = Vec<String>, queue = "diff")]
impl Middle {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<String>>, fan: &mut FanOut) -> StepResult {
        for verb in cx.input().clone() {
            fan.start::<Child>(&verb)?;
        }
        Ok(Flow::Complete)
    }
}

pub(super) fn spread_kids(cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
    for kid in cx.input().clone() {
        match kid {
            Kid::Child(verb) => fan.start::<Child>(&verb)?,
            Kid::Middle(verbs) => fan.start::<Middle>(&verbs)?,
        }
    }
    cx.output(&serde_json::json!({ "kids": fan.len(), "attempt": cx.attempt() }))?;
    Ok(Flow::Complete)
}

/// `spread` fans out to its input's kids (`on_batch_failure` by the type), then
/// `after`.
macro_rules! parent_workflow {
    ($ty:ident, $name:literal $(, $on_failure:literal)?) => {
        pub(super) struct $ty;

        #[workflow(name = $name, input = Vec<Kid>, queue = "diff")]
        impl $ty {
            #[fan_out($(on_batch_failure = $on_failure)?)]
            async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
                spread_kids(cx, fan)
            }

            #[step]
            async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
        }
    };
}

parent_workflow!(FanPause, "diff.fan.pause");
parent_workflow!(FanCancel, "diff.fan.cancel", "cancel");
parent_workflow!(FanSkip, "diff.fan.skip", "skip");

/// Registers every workflow of the fan_out scenarios.
pub(super) fn fan<R: Rig>(h: Harness<R>) -> Harness<R> {
    h.register(Child)
        .register(Middle)
        .register(FanPause)
        .register(FanCancel)
        .register(FanSkip)
}

/// A batch of three children, one of which waits for a signal, and an empty
/// one; no sweep finds anything stuck.
async fn all_finish<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let parent = h
        .start::<FanPause>(&vec![child("finish"), child("hold"), child("finish")])
        .await;
    let empty = h.start::<FanPause>(&vec![]).await;
    h.run_until_idle().await;
    let children = h.children(parent).await;
    assert_eq!(children.len(), 3);
    let report = h.sweep_report().await;
    assert_eq!(
        (
            report.repaired,
            report.runs_deleted,
            report.batches_resolved
        ),
        (0, 0, 0),
        "a batch with a child still waiting is not stuck"
    );
    h.advance(Duration::from_mins(1));
    h.signal(children[1], "release", &serde_json::json!(null))
        .await
        .expect("sent");
    drive(h).await;
    let report = h.sweep_report().await;
    assert_eq!(
        (
            report.repaired,
            report.runs_deleted,
            report.batches_resolved
        ),
        (0, 0, 0),
        "nothing stuck"
    );
    vec![parent, empty]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_children_all_finish_completes_the_same_way() {
    let projections = both!(|h| fan(h), all_finish());
    let [parent, empty] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(parent.status, RunStatus::Finished);
    let batch = &parent.batches[0];
    assert_eq!(
        (
            batch.total,
            batch.finished,
            batch.cancelled,
            batch.status.as_str()
        ),
        (3, 3, 0, "succeeded")
    );
    assert_eq!(batch.parent_step, Some(0));
    assert_eq!(batch.resolved_ms, Some(60_000));
    assert_eq!(parent.steps[0].outcome, Some(StepOutcome::Completed));
    assert_eq!(
        parent.steps[0].output,
        Some(serde_json::json!({"kids": 3, "attempt": 1})),
        "the body's output, kept from its park"
    );
    let resolved = parent
        .events
        .iter()
        .find(|e| e.0 == "batch_resolved")
        .expect("batch_resolved");
    assert_eq!(
        resolved.4,
        Some(serde_json::json!({
            "batch_id": "r0/b0", "total": 3, "finished": 3, "cancelled": 0
        }))
    );
    for kid in &batch.children {
        assert_eq!(kid.status, RunStatus::Finished);
        assert_eq!(kid.parent_batch.as_deref(), Some("r0/b0"));
        assert_eq!(
            kid.events[0].4,
            Some(serde_json::json!({"parent_run_id": "r0", "batch_id": "r0/b0"}))
        );
        assert_eq!(kid.events[0].3.as_deref(), Some("fan_out"));
    }
    assert_eq!(empty.status, RunStatus::Finished);
    assert!(empty.batches.is_empty(), "an empty batch completes at once");
    assert!(!event_names(empty).contains(&"step_waiting"));
}

/// A child cancels itself under each `on_batch_failure`; an operator cancels
/// one and skips a parent.
async fn a_child_cancelled<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let kids = vec![child("finish"), child("cancel")];
    let pause = h.start::<FanPause>(&kids).await;
    let cancel = h.start::<FanCancel>(&kids).await;
    let skip = h.start::<FanSkip>(&kids).await;
    // An operator cancels a waiting child.
    let by_hand = h.start::<FanSkip>(&vec![child("hold")]).await;
    // Paused on FanOutFailed, then skipped by an operator.
    let passed_over = h.start::<FanPause>(&kids).await;
    h.run_until_idle().await;
    assert_eq!(
        h.act(passed_over, Action::Skip, "bill the rest by hand")
            .await,
        Ok(RunStatus::Ready)
    );
    let held = h.children(by_hand).await;
    assert_eq!(
        h.act(held[0], Action::Cancel, "not needed").await,
        Ok(RunStatus::Cancelled)
    );
    drive(h).await;
    vec![pause, cancel, skip, by_hand, passed_over]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_child_applies_each_on_batch_failure_the_same_way() {
    let projections = both!(|h| fan(h), a_child_cancelled());
    let [pause, cancel, skip, by_hand, passed_over] = &projections[..] else {
        unreachable!()
    };
    let fan_out_failed = |p: &Projection| {
        p.steps[0]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("FanOutFailed"))
    };
    assert_eq!(pause.status, RunStatus::Paused);
    assert!(fan_out_failed(pause));
    assert!(
        pause
            .error
            .1
            .as_deref()
            .is_some_and(|m| m.contains("1 of 2 child runs were cancelled")),
        "{:?}",
        pause.error
    );
    assert_eq!(cancel.status, RunStatus::Cancelled);
    assert!(fan_out_failed(cancel));
    assert_eq!(skip.status, RunStatus::Finished);
    assert_eq!(skip.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(by_hand.status, RunStatus::Finished);
    assert_eq!(by_hand.batches[0].status, BatchStatus::Failed);
    assert_eq!(by_hand.batches[0].children[0].status, RunStatus::Cancelled);
    assert_eq!(passed_over.status, RunStatus::Finished);
    assert_eq!(
        passed_over.error,
        (None, None),
        "the skip cleared the error"
    );
    assert_eq!(passed_over.steps.len(), 2, "no new batch");
}

/// An operator cancels a parent whose children (one of them a fan_out of its
/// own) still run.
async fn cascade<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let parent = h
        .start::<FanPause>(&vec![
            Kid::Middle(vec!["hold".to_owned(), "finish".to_owned()]),
            child("hold"),
            child("finish"),
        ])
        .await;
    h.run_until_idle().await;
    h.advance(Duration::from_secs(5));
    assert_eq!(
        h.act(parent, Action::Cancel, "stop everything").await,
        Ok(RunStatus::Cancelled)
    );
    drive(h).await;
    assert_eq!(h.sweep_report().await.batches_resolved, 0);
    vec![parent]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_cascades_to_children_and_grandchildren_the_same_way() {
    let projections = both!(|h| fan(h), cascade());
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Cancelled);
    let batch = &parent.batches[0];
    assert_eq!(
        (batch.finished, batch.cancelled, batch.status.as_str()),
        (1, 0, "failed"),
        "closed by the cancel, not counted"
    );
    let statuses: Vec<RunStatus> = batch.children.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Cancelled,
            RunStatus::Cancelled,
            RunStatus::Finished
        ]
    );
    let middle = &batch.children[0];
    assert_eq!(middle.batches[0].status, BatchStatus::Failed);
    let grandchildren: Vec<RunStatus> = middle.batches[0]
        .children
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(grandchildren, [RunStatus::Cancelled, RunStatus::Finished]);
    let cascaded = middle.batches[0].children[0].events.last().expect("events");
    assert_eq!(cascaded.0, "cancelled");
    assert_eq!(cascaded.3.as_deref(), Some("parent run r0 was cancelled"));
    assert_eq!(
        cascaded.4,
        Some(serde_json::json!({"cancelled_with": "r0"}))
    );
    assert_eq!(
        middle.batches[0].children[0].times_ms.3,
        Some(5_000),
        "cancelled_at"
    );
}

/// A child cancelled by hand fails the batch; the parent is resumed.
async fn fresh_batch<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let parent = h.start::<FanPause>(&vec![child("hold")]).await;
    h.run_until_idle().await;
    let first = h.children(parent).await;
    assert_eq!(
        h.act(first[0], Action::Cancel, "wrong one").await,
        Ok(RunStatus::Cancelled)
    );
    h.run_until_idle().await;
    assert_eq!(h.view(parent).await.run.status, RunStatus::Paused);
    h.advance(Duration::from_secs(30));
    assert_eq!(
        h.act(parent, Action::Resume, "try again").await,
        Ok(RunStatus::Ready)
    );
    h.run_until_idle().await;
    let all = h.children(parent).await;
    assert_eq!(all.len(), 2);
    h.signal(all[1], "release", &serde_json::json!(null))
        .await
        .expect("sent");
    drive(h).await;
    vec![parent]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_failed_fan_out_starts_a_fresh_batch_the_same_way() {
    let projections = both!(|h| fan(h), fresh_batch());
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Finished);
    let batches: Vec<(Option<usize>, &str)> = parent
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str()))
        .collect();
    assert_eq!(batches, [(Some(0), "failed"), (Some(1), "succeeded")]);
    assert_eq!(parent.steps[1].attempt, 2);
    assert_eq!(
        parent.steps[1].output,
        Some(serde_json::json!({"kids": 1, "attempt": 2}))
    );
}

/// Operators on a middle child, a parent whose batch resolves while paused, a
/// parent whose waiting step is skipped, and a child that pauses.
async fn operators_on_parents<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    // A middle child cancelled by hand: its children go with it, and it
    // counts as cancelled in its parent's batch (skip: the parent goes on).
    let skipper = h
        .start::<FanSkip>(&vec![Kid::Middle(vec!["hold".to_owned()]), child("finish")])
        .await;
    // A parent paused while its batch resolves: woken, but it waits for resume.
    let paused = h.start::<FanPause>(&vec![child("hold")]).await;
    // A parent whose waiting fan_out step an operator skips: the batch
    // stays open, resolves later, and wakes nothing.
    let skipped = h.start::<FanPause>(&vec![child("hold")]).await;
    // A child that pauses: the batch waits for it; cancelling it fails the batch.
    let pausing = h.start::<FanPause>(&vec![child("pause")]).await;
    h.run_until_idle().await;

    let middle = h.children(skipper).await[0];
    assert_eq!(
        h.act(middle, Action::Cancel, "not this branch").await,
        Ok(RunStatus::Cancelled)
    );
    assert_eq!(
        h.act(paused, Action::Pause, "hold on").await,
        Ok(RunStatus::Paused)
    );
    let held = h.children(paused).await[0];
    h.signal(held, "release", &serde_json::json!(null))
        .await
        .expect("sent");
    assert_eq!(
        h.act(skipped, Action::Pause, "r").await,
        Ok(RunStatus::Paused)
    );
    assert_eq!(
        h.act(skipped, Action::Skip, "do not wait").await,
        Ok(RunStatus::Ready)
    );
    h.run_until_idle().await;
    assert_eq!(
        h.view(paused).await.steps[0].status,
        StepStatus::Scheduled,
        "woken while paused"
    );
    h.advance(Duration::from_secs(10));
    assert_eq!(
        h.act(paused, Action::Resume, "go on").await,
        Ok(RunStatus::Ready)
    );
    let late = h.children(skipped).await[0];
    h.signal(late, "release", &serde_json::json!(null))
        .await
        .expect("sent");
    let paused_child = h.children(pausing).await[0];
    assert_eq!(
        h.act(paused_child, Action::Cancel, "give up").await,
        Ok(RunStatus::Cancelled)
    );
    drive(h).await;
    assert_eq!(h.sweep_report().await.batches_resolved, 0);
    vec![skipper, paused, skipped, pausing]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_on_parents_and_middle_children_agree() {
    let projections = both!(|h| fan(h), operators_on_parents());
    let [skipper, paused, skipped, pausing] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(skipper.status, RunStatus::Finished);
    let batch = &skipper.batches[0];
    assert_eq!((batch.finished, batch.cancelled), (1, 1));
    let middle = &batch.children[0];
    assert_eq!(middle.batches[0].status, BatchStatus::Failed);
    assert_eq!(middle.batches[0].children[0].status, RunStatus::Cancelled);
    assert_eq!(paused.status, RunStatus::Finished);
    assert_eq!(
        paused.steps[0].times_ms.2,
        Some(10_000),
        "completed on resume"
    );
    assert_eq!(skipped.status, RunStatus::Finished);
    assert_eq!(skipped.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(skipped.batches[0].status, BatchStatus::Succeeded);
    assert!(!event_names(skipped).contains(&"batch_resolved"));
    assert_eq!(pausing.status, RunStatus::Paused);
    assert_eq!(pausing.batches[0].status, BatchStatus::Failed);
}

// ---- signal pages ---------------------------------------------------------------------
