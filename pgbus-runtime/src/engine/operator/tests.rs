use super::*;

fn planned(name: &str, wait_ms: u64) -> PlannedStep {
    PlannedStep {
        name: name.to_owned(),
        queue: "q".to_owned(),
        priority: 3,
        timeout_ms: Some(9_000),
        wait_ms,
        wait_for: None,
    }
}

fn latest(name: &str, status: StepStatus, outcome: Option<StepOutcome>) -> LatestStep {
    LatestStep {
        id: 7,
        step_name: name.to_owned(),
        attempt: 2,
        status,
        outcome,
        queue: "row-queue".to_owned(),
        priority: 5,
        timeout_ms: Some(1_000),
    }
}

fn run(status: RunStatus, latest: Option<LatestStep>) -> ActionRun {
    ActionRun {
        status,
        current_step: latest.as_ref().map(|l| l.step_name.clone()),
        step_plan: Some(vec![planned("a", 0), planned("b", 5_000)]),
        latest,
    }
}

fn events(plan: &ActionPlan) -> Vec<(&str, bool)> {
    plan.events
        .iter()
        .map(|e| (e.event.as_str(), e.about_step))
        .collect()
}

#[test]
fn pause_is_legal_from_ready_and_performing_only() {
    for status in [RunStatus::Ready, RunStatus::Performing] {
        let plan = plan_action(Action::Pause, &run(status, None), "why").expect("legal");
        assert_eq!(plan.run_status, RunStatus::Paused);
        assert_eq!(events(&plan), [("paused", false)]);
        assert_eq!(plan.events[0].reason.as_deref(), Some("why"));
        assert!(plan.next.is_none() && !plan.cancel_open_steps && !plan.skip_latest);
    }
    assert_eq!(
        plan_action(Action::Pause, &run(RunStatus::Paused, None), "r"),
        Err(IllegalMove::AlreadyPaused)
    );
}

#[test]
fn nothing_is_legal_on_an_ended_run() {
    for status in [RunStatus::Finished, RunStatus::Cancelled] {
        for action in [Action::Pause, Action::Resume, Action::Cancel, Action::Skip] {
            assert_eq!(
                plan_action(action, &run(status, None), "r"),
                Err(IllegalMove::Ended { status }),
                "{action} on a {status} run"
            );
        }
    }
}

#[test]
fn cancel_cancels_open_rows_from_any_live_status() {
    for status in [RunStatus::Ready, RunStatus::Performing, RunStatus::Paused] {
        let plan = plan_action(Action::Cancel, &run(status, None), "r").expect("legal");
        assert_eq!(plan.run_status, RunStatus::Cancelled);
        assert!(plan.cancel_open_steps);
        assert!(!plan.clear_error, "a cancelled run keeps its last error");
        assert_eq!(events(&plan), [("cancelled", false)]);
    }
}

#[test]
fn resume_and_skip_need_a_paused_run() {
    for action in [Action::Resume, Action::Skip] {
        for status in [RunStatus::Ready, RunStatus::Performing] {
            assert_eq!(
                plan_action(action, &run(status, None), "r"),
                Err(IllegalMove::NotPaused { status })
            );
        }
    }
}

#[test]
fn resume_with_an_open_row_goes_on_with_it() {
    let scheduled = run(
        RunStatus::Paused,
        Some(latest("b", StepStatus::Scheduled, None)),
    );
    let plan = plan_action(Action::Resume, &scheduled, "r").expect("legal");
    assert_eq!(plan.run_status, RunStatus::Ready);
    assert_eq!(plan.next, None);
    assert_eq!(events(&plan), [("resumed", false)]);

    let running = run(
        RunStatus::Paused,
        Some(latest("a", StepStatus::InProgress, None)),
    );
    let plan = plan_action(Action::Resume, &running, "r").expect("legal");
    assert_eq!(
        plan.run_status,
        RunStatus::Performing,
        "the step still runs"
    );
}

#[test]
fn resume_after_an_error_runs_a_new_attempt_now_with_reattempts_reset() {
    let failed = run(
        RunStatus::Paused,
        Some(latest("a", StepStatus::Failed, Some(StepOutcome::Paused))),
    );
    let plan = plan_action(Action::Resume, &failed, "fixed").expect("legal");
    assert_eq!(plan.run_status, RunStatus::Ready);
    assert!(plan.clear_error);
    assert_eq!(plan.current_step.as_deref(), Some("a"));
    assert_eq!(
        plan.next,
        Some(NewStep {
            step_name: "a".to_owned(),
            attempt: 3,
            reattempts: 0,
            queue: "row-queue".to_owned(),
            priority: 5,
            timeout_ms: Some(1_000),
            delay_ms: 0,
        })
    );
}

#[test]
fn resume_after_a_pause_verb_schedules_the_next_step_or_finishes() {
    let paused_a = run(
        RunStatus::Paused,
        Some(latest(
            "a",
            StepStatus::Completed,
            Some(StepOutcome::Paused),
        )),
    );
    let plan = plan_action(Action::Resume, &paused_a, "r").expect("legal");
    assert_eq!(plan.current_step.as_deref(), Some("b"));
    assert_eq!(plan.next, Some(planned("b", 5_000).first_attempt()));
    assert_eq!(plan.run_status, RunStatus::Ready);

    let paused_b = run(
        RunStatus::Paused,
        Some(latest(
            "b",
            StepStatus::Completed,
            Some(StepOutcome::Paused),
        )),
    );
    let plan = plan_action(Action::Resume, &paused_b, "r").expect("legal");
    assert_eq!(plan.run_status, RunStatus::Finished);
    assert_eq!(plan.next, None);
    assert_eq!(events(&plan), [("resumed", false), ("finished", false)]);
}

#[test]
fn skip_passes_over_the_pending_step() {
    // A failed step: passed over, the next one scheduled.
    let failed = run(
        RunStatus::Paused,
        Some(latest("a", StepStatus::Failed, Some(StepOutcome::Paused))),
    );
    let plan = plan_action(Action::Skip, &failed, "r").expect("legal");
    assert!(!plan.skip_latest, "a failed row keeps its history");
    assert_eq!(plan.next.as_ref().map(|n| n.step_name.as_str()), Some("b"));
    assert_eq!(plan.run_status, RunStatus::Ready);
    assert_eq!(events(&plan), [("step_skipped", true), ("resumed", false)]);

    // A held scheduled row: marked skipped; the last step, so the run finishes.
    let held = run(
        RunStatus::Paused,
        Some(latest("b", StepStatus::Scheduled, None)),
    );
    let plan = plan_action(Action::Skip, &held, "r").expect("legal");
    assert!(plan.skip_latest);
    assert_eq!(plan.next, None);
    assert_eq!(plan.run_status, RunStatus::Finished);
    assert_eq!(events(&plan), [("step_skipped", true), ("finished", false)]);
}

#[test]
fn skip_refuses_a_running_step_and_a_completed_one() {
    let running = run(
        RunStatus::Paused,
        Some(latest("a", StepStatus::InProgress, None)),
    );
    assert_eq!(
        plan_action(Action::Skip, &running, "r"),
        Err(IllegalMove::StepRunning {
            step: "a".to_owned()
        })
    );
    let completed = run(
        RunStatus::Paused,
        Some(latest(
            "a",
            StepStatus::Completed,
            Some(StepOutcome::Paused),
        )),
    );
    assert_eq!(
        plan_action(Action::Skip, &completed, "r"),
        Err(IllegalMove::NothingToSkip {
            step: "a".to_owned()
        })
    );
}

#[test]
fn advancing_without_a_plan_or_off_the_plan_is_refused_not_finished() {
    let mut no_plan = run(
        RunStatus::Paused,
        Some(latest("a", StepStatus::Failed, Some(StepOutcome::Paused))),
    );
    no_plan.step_plan = None;
    assert!(matches!(
        plan_action(Action::Skip, &no_plan, "r"),
        Err(IllegalMove::NoStepPlan { .. })
    ));
    let off_plan = run(
        RunStatus::Paused,
        Some(latest(
            "zz",
            StepStatus::Completed,
            Some(StepOutcome::Paused),
        )),
    );
    assert!(matches!(
        plan_action(Action::Resume, &off_plan, "r"),
        Err(IllegalMove::NoStepPlan { .. })
    ));
}
