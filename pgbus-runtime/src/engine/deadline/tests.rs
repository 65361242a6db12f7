//! Deadline decisions: which deadline a start gets and from when it counts,
//! what the start options accept, and what the sweep does to a run past it.

use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};

use super::*;
use crate::definition::FlowControl;
use crate::engine::{LatestStep, PlannedStep, RunStatus, StepStatus, plan_start};
use crate::prelude::*;
use crate::{Error, Workflow};

struct Report;

#[workflow(name = "deadline.report")]
impl Report {
    #[step(wait = "5s")]
    async fn gather(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

/// `Report` declaring `deadline = "2h", on_deadline = "pause"`.
static TWO_HOURS: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        deadline_ms: Some(7_200_000),
        on_deadline: DeadlineAction::Pause,
        ..FlowControl::NONE
    },
    ..*<Report as Workflow>::DEFINITION
};

const PLAIN: &WorkflowDefinition = <Report as Workflow>::DEFINITION;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 0).unwrap()
}

fn later(ms: i64) -> DateTime<Utc> {
    now() + chrono::Duration::milliseconds(ms)
}

#[test]
fn the_declared_deadline_counts_from_the_start_time_not_the_first_wait() {
    let plan = plan_start(&TWO_HOURS, &StartOptions::new(), now()).unwrap();
    assert_eq!(plan.on_deadline, DeadlineAction::Pause);
    assert_eq!(plan.deadline.map(|d| d.at(now())), Some(later(7_200_000)));
    // The first step's 5 s wait does not move it.
    assert_eq!(plan.due.at(now()), later(5_000));

    let delayed = StartOptions::new().delay(Duration::from_mins(10));
    let plan = plan_start(&TWO_HOURS, &delayed, now()).unwrap();
    assert_eq!(
        plan.deadline.map(|d| d.at(now())),
        Some(later(600_000 + 7_200_000)),
        "from now plus the delay"
    );

    let at = StartOptions::new().at(later(3_600_000));
    let plan = plan_start(&TWO_HOURS, &at, now()).unwrap();
    assert_eq!(
        plan.deadline.map(|d| d.at(now())),
        Some(later(3_600_000 + 7_200_000)),
        "from the `at`"
    );

    // An `at` already past counts from now: the run starts now.
    let past = StartOptions::new().at(later(-60_000));
    let plan = plan_start(&TWO_HOURS, &past, now()).unwrap();
    assert_eq!(plan.deadline.map(|d| d.at(now())), Some(later(7_200_000)));
}

#[test]
fn a_starts_deadline_wins_over_the_declared_one_and_the_last_option_wins() {
    let own = StartOptions::new().deadline_after(Duration::from_mins(1));
    let plan = plan_start(&TWO_HOURS, &own, now()).unwrap();
    assert_eq!(plan.deadline.map(|d| d.at(now())), Some(later(60_000)));
    assert_eq!(
        plan.on_deadline,
        DeadlineAction::Pause,
        "the action stays the workflow's"
    );

    let fixed = StartOptions::new()
        .deadline_after(Duration::from_mins(1))
        .deadline(later(90_000));
    let plan = plan_start(&TWO_HOURS, &fixed, now()).unwrap();
    assert_eq!(plan.deadline, Some(RunDeadline::At(later(90_000))));
    // A fixed deadline is not moved by the store's clock.
    assert_eq!(
        plan.deadline.map(|d| d.at(later(80_000))),
        Some(later(90_000))
    );

    let after = StartOptions::new()
        .deadline(later(90_000))
        .deadline_after(Duration::from_mins(3));
    let plan = plan_start(&TWO_HOURS, &after, now()).unwrap();
    assert_eq!(plan.deadline.map(|d| d.at(now())), Some(later(180_000)));

    // Without a declared deadline: none, unless the start gives one (with
    // the default action).
    let plan = plan_start(PLAIN, &StartOptions::new(), now()).unwrap();
    assert_eq!(plan.deadline, None);
    let plan = plan_start(PLAIN, &own, now()).unwrap();
    assert_eq!(plan.deadline.map(|d| d.at(now())), Some(later(60_000)));
    assert_eq!(plan.on_deadline, DeadlineAction::Cancel);
}

#[test]
fn a_counted_deadline_is_computed_on_the_stores_clock() {
    let deadline = RunDeadline::After {
        from: None,
        after_ms: 1_000,
    };
    // The store's clock is ahead of the caller's: counted from the store's.
    assert_eq!(deadline.at(later(500)), later(1_500));
    assert_eq!(
        RunDeadline::sql_parts(Some(deadline)),
        (None, None, Some(1_000))
    );
    assert_eq!(
        RunDeadline::sql_parts(Some(RunDeadline::At(now()))),
        (Some(now()), None, None)
    );
    assert_eq!(RunDeadline::sql_parts(None), (None, None, None));
}

fn refused(options: &StartOptions) -> (&'static str, String) {
    match options.check(now()) {
        Err(Error::InvalidStartOption { option, problem }) => (option, problem),
        other => panic!("refused, not {other:?}"),
    }
}

#[test]
fn the_start_options_hold_a_deadline_to_the_start_time_and_the_longest_duration() {
    assert!(StartOptions::new().deadline(later(1)).check(now()).is_ok());
    let (option, problem) = refused(&StartOptions::new().deadline(now()));
    assert_eq!(option, "deadline");
    assert!(problem.contains("after the run's start time"), "{problem}");
    // Before a delayed start time, or an `at`.
    let (option, _) = refused(
        &StartOptions::new()
            .delay(Duration::from_mins(5))
            .deadline(later(60_000)),
    );
    assert_eq!(option, "deadline");
    let (option, _) = refused(
        &StartOptions::new()
            .at(later(600_000))
            .deadline(later(300_000)),
    );
    assert_eq!(option, "deadline");
    // 36,500 days after the start time at most.
    let max = i64::try_from(pgbus_core::MAX_DURATION_MS).unwrap();
    assert!(
        StartOptions::new()
            .delay(Duration::from_hours(1))
            .deadline(later(3_600_000 + max))
            .check(now())
            .is_ok()
    );
    let (option, problem) = refused(&StartOptions::new().deadline(later(max + 1)));
    assert_eq!(option, "deadline");
    assert!(problem.contains("36500 days"), "{problem}");

    let (option, _) = refused(&StartOptions::new().deadline_after(Duration::ZERO));
    assert_eq!(option, "deadline_after");
    let too_long = Duration::from_millis(pgbus_core::MAX_DURATION_MS + 1);
    let (option, problem) = refused(&StartOptions::new().deadline_after(too_long));
    assert_eq!(option, "deadline_after");
    assert!(problem.contains("36500d"), "{problem}");
    assert!(
        StartOptions::new()
            .deadline_after(Duration::from_millis(pgbus_core::MAX_DURATION_MS))
            .check(now())
            .is_ok()
    );
}

fn run(status: RunStatus, latest: Option<StepStatus>) -> ActionRun {
    ActionRun {
        status,
        current_step: Some("gather".to_owned()),
        step_plan: Some(vec![PlannedStep {
            name: "gather".to_owned(),
            queue: "default".to_owned(),
            priority: 0,
            timeout_ms: None,
            wait_ms: 0,
            wait_for: None,
        }]),
        latest: latest.map(|status| LatestStep {
            id: 3,
            step_name: "gather".to_owned(),
            attempt: 1,
            status,
            outcome: None,
            queue: "default".to_owned(),
            priority: 0,
            timeout_ms: None,
        }),
    }
}

fn state(at: Option<DateTime<Utc>>, on_deadline: DeadlineAction) -> DeadlineState {
    DeadlineState {
        deadline_at: at,
        on_deadline,
    }
}

fn kinds(plan: &ActionPlan) -> Vec<&'static str> {
    plan.events.iter().map(|e| e.event.as_str()).collect()
}

#[test]
fn past_its_deadline_a_run_is_cancelled_after_a_deadline_exceeded_event() {
    let deadline = state(Some(now()), DeadlineAction::Cancel);
    for status in [RunStatus::Ready, RunStatus::Performing, RunStatus::Paused] {
        let plan = plan_deadline(&run(status, Some(StepStatus::InProgress)), &deadline, now())
            .unwrap()
            .expect("at the deadline, past it");
        assert_eq!(plan.run_status, RunStatus::Cancelled, "from {status}");
        assert!(plan.cancel_open_steps, "a running body loses its claim");
        assert_eq!(kinds(&plan), ["deadline_exceeded", "cancelled"]);
        let exceeded = &plan.events[0];
        assert_eq!(
            exceeded.details,
            Some(serde_json::json!({ "deadline_at": "2030-06-01T12:00:00.000Z" }))
        );
        assert_eq!(
            exceeded.reason.as_deref(),
            Some("the run's deadline (2030-06-01T12:00:00.000Z) passed")
        );
        assert_eq!(
            plan.events[1].reason, exceeded.reason,
            "the cancel says why"
        );
    }
}

#[test]
fn past_its_deadline_a_run_that_pauses_is_paused_or_only_told() {
    let deadline = state(Some(now()), DeadlineAction::Pause);
    let plan = plan_deadline(
        &run(RunStatus::Performing, Some(StepStatus::InProgress)),
        &deadline,
        later(1),
    )
    .unwrap()
    .expect("past it");
    assert_eq!(plan.run_status, RunStatus::Paused);
    assert!(
        !plan.cancel_open_steps,
        "the step in progress records its outcome"
    );
    assert_eq!(kinds(&plan), ["deadline_exceeded", "paused"]);

    // Paused already (by an operator): the event alone, the run as it is.
    let paused = run(RunStatus::Paused, Some(StepStatus::Scheduled));
    let plan = plan_deadline(&paused, &deadline, later(1))
        .unwrap()
        .expect("past it");
    assert_eq!(
        (plan.run_status, plan.current_step.as_deref()),
        (RunStatus::Paused, Some("gather"))
    );
    assert!(!plan.clear_error && !plan.cancel_open_steps && plan.next.is_none());
    assert_eq!(kinds(&plan), ["deadline_exceeded"]);
}

#[test]
fn a_deadline_ahead_spent_or_missing_or_an_ended_run_is_left_alone() {
    let ready = run(RunStatus::Ready, Some(StepStatus::Scheduled));
    for action in [DeadlineAction::Cancel, DeadlineAction::Pause] {
        let ahead = state(Some(later(1)), action);
        assert_eq!(plan_deadline(&ready, &ahead, now()), Ok(None));
        assert_eq!(plan_deadline(&ready, &state(None, action), now()), Ok(None));
        for ended in [RunStatus::Finished, RunStatus::Cancelled] {
            let past = state(Some(later(-1)), action);
            assert_eq!(plan_deadline(&run(ended, None), &past, now()), Ok(None));
        }
    }
    assert!(past_deadline(Some(now()), now()));
    assert!(!past_deadline(Some(later(1)), now()));
    assert!(!past_deadline(None, now()));
}
