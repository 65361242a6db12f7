//! The engine's decisions, on a small definition: every verb, with and without an
//! error, the outside-pause hold, and policy resolution.

use super::*;
use crate::definition::WorkflowDefinition;
use crate::prelude::*;
use crate::{GuardRef, Workflow};

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

#[derive(Debug, thiserror::Error)]
#[error("flaky")]
struct Flaky;

struct Shop;

#[workflow(name = "shop", queue = "shop", priority = 3)]
#[on_exception(matching(CardDeclined), action = "cancel")]
#[on_exception(action = "skip", report = "never")]
impl Shop {
    #[step]
    async fn first(&self, _cx: &mut StepCx<()>) {}

    removed_step!(gone);

    #[step(
        wait = "5s",
        queue = "slow",
        timeout = "30s",
        on_exception(
            matching(Flaky),
            action = "reattempt",
            wait = "2s",
            max_reattempts = 2,
            terminal_action = "cancel",
            report = "terminal_only"
        )
    )]
    async fn second(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn last(&self, _cx: &mut StepCx<()>) {}
}

const DEF: &WorkflowDefinition = <Shop as Workflow>::DEFINITION;

fn attempt(step: &str, attempt: i32, reattempts: i32) -> AttemptState {
    AttemptState {
        step_name: step.to_owned(),
        attempt,
        reattempts,
    }
}

fn ready() -> RunState {
    RunState {
        step_names: None,
        step_plan: None,
        status: RunStatus::Performing,
        overrides: RunOverrides::default(),
    }
}

#[allow(clippy::unnecessary_wraps)] // reads as the field it fills
fn error() -> Option<ErrorRecord> {
    Some(ErrorRecord {
        class: "E".into(),
        message: "boom".into(),
        causes: vec![],
    })
}

fn events(plan: &Plan) -> Vec<&'static str> {
    plan.events.iter().map(|e| e.event.as_str()).collect()
}

#[test]
fn complete_schedules_the_next_live_step_with_its_wait_and_placement() {
    let plan = plan_outcome(
        DEF,
        &ready(),
        &attempt("first", 1, 0),
        &AttemptResult::ok(Verb::Complete, None),
    );
    assert_eq!(
        (plan.step_status, plan.step_outcome),
        (StepStatus::Completed, StepOutcome::Completed)
    );
    let next = plan.next.clone().expect("next step");
    assert_eq!(next.step_name, "second", "the gravestone is passed over");
    assert_eq!(
        (next.attempt, next.reattempts, next.delay_ms),
        (1, 0, 5_000)
    );
    assert_eq!(
        (next.queue.as_str(), next.priority, next.timeout_ms),
        ("slow", 3, Some(30_000))
    );
    assert_eq!(plan.run_status, RunStatus::Ready);
    assert_eq!(plan.current_step.as_deref(), Some("second"));
    assert_eq!(events(&plan), ["step_completed"]);
}

#[test]
fn the_last_step_finishes_the_run() {
    let plan = plan_outcome(
        DEF,
        &ready(),
        &attempt("last", 1, 0),
        &AttemptResult::ok(Verb::Complete, None),
    );
    assert!(plan.next.is_none());
    assert_eq!(plan.run_status, RunStatus::Finished);
    assert_eq!(events(&plan), ["step_completed", "finished"]);
}

#[test]
fn each_verb_follows_the_outcome_table() {
    let cases = [
        (
            Verb::Finish,
            StepStatus::Completed,
            StepOutcome::FinishedEarly,
            RunStatus::Finished,
        ),
        (
            Verb::Pause { reason: "r".into() },
            StepStatus::Completed,
            StepOutcome::Paused,
            RunStatus::Paused,
        ),
        (
            Verb::Skip { reason: "r".into() },
            StepStatus::Skipped,
            StepOutcome::Skipped,
            RunStatus::Ready,
        ),
        (
            Verb::Cancel { reason: "r".into() },
            StepStatus::Cancelled,
            StepOutcome::Cancelled,
            RunStatus::Cancelled,
        ),
        (
            Verb::Reattempt { wait_ms: 7 },
            StepStatus::Failed,
            StepOutcome::Reattempted,
            RunStatus::Ready,
        ),
    ];
    for (verb, status, outcome, run) in cases {
        let ok = plan_outcome(
            DEF,
            &ready(),
            &attempt("first", 1, 0),
            &AttemptResult::ok(verb.clone(), None),
        );
        assert_eq!(
            (ok.step_status, ok.step_outcome, ok.run_status),
            (status, outcome, run),
            "{verb:?}"
        );
        let with_error = AttemptResult {
            verb: verb.clone(),
            error: error(),
            output: None,
            report: true,
            handler_error: None,
            gate: None,
            park: None,
        };
        let failed = plan_outcome(DEF, &ready(), &attempt("first", 1, 0), &with_error);
        assert_eq!(
            failed.step_status,
            StepStatus::Failed,
            "{verb:?} with an error"
        );
        assert_eq!(
            (failed.step_outcome, failed.run_status),
            (outcome, run),
            "{verb:?} with an error"
        );
        assert_eq!(failed.events[0].event.as_str(), "step_failed");
    }
}

#[test]
fn cancel_cancels_open_rows_and_pause_keeps_the_error() {
    let cancel = plan_outcome(
        DEF,
        &ready(),
        &attempt("first", 1, 0),
        &AttemptResult::ok(
            Verb::Cancel {
                reason: "no".into(),
            },
            None,
        ),
    );
    assert!(cancel.cancel_open_steps);
    assert_eq!(
        cancel
            .events
            .last()
            .and_then(|e| e.reason.clone())
            .as_deref(),
        Some("no")
    );
    let paused = plan_outcome(
        DEF,
        &ready(),
        &attempt("first", 1, 0),
        &AttemptResult {
            verb: Verb::Pause { reason: "p".into() },
            error: error(),
            output: None,
            report: true,
            handler_error: None,
            gate: None,
            park: None,
        },
    );
    assert_eq!(paused.run_error, error());
}

#[test]
fn a_reattempt_is_the_same_step_one_attempt_later() {
    let plan = plan_outcome(
        DEF,
        &ready(),
        &attempt("second", 4, 3),
        &AttemptResult::ok(Verb::Reattempt { wait_ms: 2_000 }, None),
    );
    let next = plan.next.expect("reattempt");
    assert_eq!(
        (
            next.step_name.as_str(),
            next.attempt,
            next.reattempts,
            next.delay_ms
        ),
        ("second", 5, 4, 2_000)
    );
    assert_eq!(next.queue, "slow");
    assert_eq!(plan.current_step.as_deref(), Some("second"));
}

#[test]
fn an_outside_pause_holds_the_run_but_the_last_step_still_finishes_it() {
    let held = RunState {
        step_names: None,
        step_plan: None,
        status: RunStatus::Paused,
        overrides: RunOverrides::default(),
    };
    let plan = plan_outcome(
        DEF,
        &held,
        &attempt("first", 1, 0),
        &AttemptResult::ok(Verb::Complete, None),
    );
    assert_eq!(plan.run_status, RunStatus::Paused);
    assert!(
        plan.next.is_some(),
        "the next row is scheduled, not claimed until resume"
    );
    let last = plan_outcome(
        DEF,
        &held,
        &attempt("last", 1, 0),
        &AttemptResult::ok(Verb::Complete, None),
    );
    assert_eq!(last.run_status, RunStatus::Finished);
}

#[test]
fn policies_resolve_step_first_then_named_then_blanket() {
    let (_, second) = DEF.entry("second").expect("second");
    let flaky = StepError::from(Flaky);
    assert_eq!(
        resolve_error(DEF, Some(second), &flaky, 0),
        Resolution::Verb {
            verb: Verb::Reattempt { wait_ms: 2_000 },
            report: false
        }
    );
    assert_eq!(
        resolve_error(DEF, Some(second), &flaky, 2),
        Resolution::Verb {
            verb: Verb::Cancel {
                reason: "step failed after 3 attempts in a row: flaky".into()
            },
            report: true
        },
        "max_reattempts = 2: the third failure in a row is terminal"
    );
    let declined = StepError::from(CardDeclined);
    assert!(matches!(
        resolve_error(DEF, Some(second), &declined, 0),
        Resolution::Verb {
            verb: Verb::Cancel { .. },
            report: true
        }
    ));
    let other = StepError::msg("other");
    assert!(matches!(
        resolve_error(DEF, Some(second), &other, 0),
        Resolution::Verb {
            verb: Verb::Skip { .. },
            report: false
        }
    ));
}

#[test]
fn without_policies_an_error_pauses_and_is_reported() {
    struct Bare;
    #[workflow]
    impl Bare {
        #[step]
        async fn only(&self, _cx: &mut StepCx<()>) {}
    }
    let definition = <Bare as Workflow>::DEFINITION;
    assert!(matches!(
        resolve_error(
            definition,
            definition.entry("only").map(|(_, e)| e),
            &StepError::msg("x"),
            0
        ),
        Resolution::Verb {
            verb: Verb::Pause { .. },
            report: true
        }
    ));
    let _ = GuardRef { id: 0, method: "" };
}
