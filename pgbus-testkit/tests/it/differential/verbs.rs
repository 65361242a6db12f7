//! Verbs, policies, guards, lost claims and operator actions.

use super::*;

/// Starts a run of `Verbs` per input and drives them all.
async fn every_verb<R: Rig>(h: &Harness<R>, inputs: &[Script]) -> Vec<RunId> {
    let mut runs = Vec::new();
    for input in inputs {
        runs.push(h.start::<Verbs>(input).await);
    }
    drive(h).await;
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_policy_and_guard_leaves_the_same_history() {
    let inputs = [
        script("complete"),
        script("finish"),
        script("pause"),
        script("cancel"),
        script("skip"),
        script("reattempt"),
        script("flaky_once"),
        script("flaky_always"),
        script("fatal"),
        script("other_error"),
        script("guard_error"),
        Script {
            cancel: true,
            ..script("complete")
        },
        Script {
            skip: true,
            ..script("complete")
        },
    ];
    let projections = both!(|h| h.register(Verbs), every_verb(&inputs));

    // The histories are not only equal but right: spot-check the table.
    let status = |i: usize| projections[i].status;
    assert_eq!(status(0), RunStatus::Finished);
    assert_eq!(status(1), RunStatus::Finished);
    assert_eq!(status(2), RunStatus::Paused);
    assert_eq!(status(3), RunStatus::Cancelled);
    assert_eq!(status(4), RunStatus::Finished);
    assert_eq!(projections[5].steps[1].attempt, 2, "reattempted once");
    assert_eq!(
        projections[7]
            .steps
            .iter()
            .filter(|s| s.name == "act")
            .count(),
        3,
        "max_reattempts = 2"
    );
    assert_eq!(
        projections[7].steps[2].outcome,
        Some(StepOutcome::Skipped),
        "terminal_action = skip"
    );
    assert_eq!(
        status(8),
        RunStatus::Cancelled,
        "workflow policy naming Fatal"
    );
    assert_eq!(status(9), RunStatus::Paused, "no policy: pause");
    assert_eq!(
        status(10),
        RunStatus::Cancelled,
        "a guard's Fatal goes to the policies"
    );
    assert_eq!(status(11), RunStatus::Cancelled, "cancel_if");
    assert_eq!(
        projections[12].steps[1].status,
        StepStatus::Skipped,
        "skip_if"
    );
}

/// `a` runs under `Before`; then a deploy drops `b`, with a gravestone or
/// (`lost`) without, and a new runner, the only live worker, drives the run
/// on and sweeps. Since issue 19 the new runner does not claim a `b` it
/// lacks: the row waits, and the sweep's grace rule pauses the run once it
/// has waited longer than the grace (before, the claim paused it at once).
async fn deploy<R: Rig>(h: &Harness<R>, lost: bool) -> Vec<RunId> {
    let run = h.start::<Before>(&1).await;
    h.run_until_idle().await; // `a`; `b` is parked a minute out
    let deployed = if lost {
        h.redeploy().register(AfterLoss)
    } else {
        h.redeploy().register(AfterRemoval)
    };
    deployed.announce().await;
    drive(&deployed).await;
    deployed.announce().await; // a heartbeat: the new worker is live
    deployed.sweep().await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gravestone_is_skipped_and_a_lost_step_pauses_the_same_way() {
    for lost in [false, true] {
        let projections = both!(|h| h.register(Before), deploy(lost));
        let expected = if lost {
            RunStatus::Paused
        } else {
            RunStatus::Finished
        };
        assert_eq!(projections[0].status, expected, "lost = {lost}");
    }
}

/// Two starts under one key start one run.
async fn idempotent<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let first = h.start_keyed::<Before>(&1, "same").await;
    let second = h.start_keyed::<Before>(&2, "same").await;
    assert_eq!(first, second);
    drive(h).await;
    vec![first]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_starts_agree() {
    both!(|h| h.register(Before), idempotent());
}

/// Lets a test hold a body open and act while it runs.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) entered: tokio::sync::Notify,
    pub(super) release: tokio::sync::Notify,
}

pub(super) struct Gated {
    pub(super) gate: std::sync::Arc<Gate>,
}

#[workflow(name = "diff.gated", input = u8)]
impl Gated {
    #[step]
    async fn hold(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&"held")?;
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

/// The claim is taken away while the body runs: its completion is late.
async fn lose_the_claim<R: Rig>(h: &Harness<R>, gate: &Gate) -> Vec<RunId> {
    let run = h.start::<Gated>(&1).await;
    let running = h.spawn_next();
    gate.entered.notified().await;
    assert!(h.lose_claim(run).await);
    gate.release.notify_one();
    assert_eq!(running.await.expect("join"), 1);
    assert_eq!(h.late_completions(), 1, "the completion lost its fence");
    assert_eq!(h.run_until_idle().await, 0, "nothing follows a lost claim");
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_lost_its_claim_is_ignored_the_same_way() {
    let gate = Arc::new(Gate::default());
    let projections = both!(
        |h| h.register(Gated {
            gate: Arc::clone(&gate)
        }),
        lose_the_claim(&gate)
    );
    let memory = &projections[0];
    assert_eq!(
        memory.status,
        RunStatus::Performing,
        "the lost attempt changed nothing"
    );
    assert_eq!(
        memory.events.last().map(|e| e.0.as_str()),
        Some("late_completion_ignored")
    );
    assert_eq!(memory.steps[0].output, None, "the late output is discarded");
}

/// A run of `Before` under a runner that knows only `AfterLoss`, the only
/// live worker of the workflow: `b` waits for a worker that has it, then the
/// sweep's grace rule pauses it.
async fn older_worker<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    h.announce().await;
    let run = h.start::<Before>(&1).await;
    drive(h).await;
    let waiting = h.view(run).await;
    assert_eq!(waiting.run.status, RunStatus::Ready, "b waits, unclaimed");
    assert_eq!(
        waiting
            .steps
            .last()
            .map(|s| (s.step_name.as_str(), s.status)),
        Some(("b", StepStatus::Scheduled))
    );
    h.announce().await; // a heartbeat: the worker is live
    assert_eq!(h.sweep_report().await.undefined_paused, 1);
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_worker_never_skips_a_step_the_run_has() {
    // The run starts under `Before` (a, b, c); the only worker runs an older
    // version without `b`. The run follows its own step list: `b` is scheduled,
    // not skipped; the worker does not claim it (issue 19: before, it claimed
    // it and paused the run at once), and once `b` has been due for longer
    // than the grace with no live worker that has it, the sweep pauses the run
    // with StepNotDefined.
    let projections = both!(|h| h.register(AfterLoss), older_worker());
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Paused);
    let names: Vec<&str> = run.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "b was not skipped");
    assert!(
        run.error
            .0
            .as_deref()
            .unwrap_or_default()
            .ends_with("StepNotDefined")
    );
}

// ---- operator actions, stalls and retention -------------------------------------

/// Pauses, resumes, skips and cancels around every kind of stop, and the
/// refusals.
async fn operator_actions<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let asked = h.start::<Verbs>(&script("pause")).await;
    let failed = h.start::<Verbs>(&script("other_error")).await;
    let early = h.start::<Verbs>(&script("complete")).await;
    let held = h.start::<Verbs>(&script("complete")).await;
    let dropped = h.start::<Verbs>(&script("complete")).await;
    assert_eq!(
        h.act(early, Action::Pause, "before it starts").await,
        Ok(RunStatus::Paused)
    );
    h.run_until_idle().await;

    // A `Pause` verb: nothing to skip; resume schedules `follow` 5 min on.
    let refused = h.act(asked, Action::Skip, "r").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("nothing to skip")),
        "{refused:?}"
    );
    assert_eq!(
        h.act(asked, Action::Resume, "go on").await,
        Ok(RunStatus::Ready)
    );
    // An error pause: resume runs a new attempt (which fails again), then
    // skip passes over it.
    h.advance(Duration::from_secs(7));
    assert_eq!(
        h.act(failed, Action::Resume, "retry").await,
        Ok(RunStatus::Ready)
    );
    h.run_until_idle().await;
    assert_eq!(
        h.act(failed, Action::Skip, "give up").await,
        Ok(RunStatus::Ready)
    );
    // Paused before its first step: resume lets it start.
    assert_eq!(
        h.act(early, Action::Resume, "r").await,
        Ok(RunStatus::Ready)
    );
    // A held row: skipped; cancel a scheduled one.
    assert_eq!(h.act(held, Action::Pause, "r").await, Ok(RunStatus::Paused));
    assert_eq!(
        h.act(held, Action::Skip, "not this one").await,
        Ok(RunStatus::Finished)
    );
    assert_eq!(
        h.act(dropped, Action::Cancel, "bye").await,
        Ok(RunStatus::Cancelled)
    );
    let refused = h.act(dropped, Action::Resume, "r").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("has ended (cancelled)")),
        "{refused:?}"
    );
    let refused = h.act(early, Action::Resume, "r").await;
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("not paused")),
        "{refused:?}"
    );
    drive(h).await;
    vec![asked, failed, early, held, dropped]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_leave_the_same_history_and_refusals() {
    let projections = both!(|h| h.register(Verbs), operator_actions());
    let status: Vec<RunStatus> = projections.iter().map(|p| p.status).collect();
    assert_eq!(
        status,
        [
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Cancelled
        ]
    );
}
