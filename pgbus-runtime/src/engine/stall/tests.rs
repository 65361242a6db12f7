//! The stall action's decision: a reattempt bounded as a policy is.

use std::time::Duration;

use super::{StallAction, stalled_result};
use crate::definition::FailureAction;
use crate::engine::Verb;

fn verb(action: StallAction, registered: bool, attempt: i32, reattempts: i32) -> Verb {
    stalled_result(action, registered, "charge", attempt, reattempts, "timeout").verb
}

const MESSAGE: &str = "attempt 4 of step `charge` stalled (timeout)";

#[test]
fn a_reattempt_runs_again_until_max_reattempts_is_used_up_then_the_terminal_action() {
    let action = StallAction::Reattempt {
        wait: Duration::from_millis(1500),
        max_reattempts: 3,
        terminal_action: FailureAction::Cancel,
    };
    for reattempts in 0..3 {
        assert_eq!(
            verb(action, true, reattempts + 1, reattempts),
            Verb::Reattempt { wait_ms: 1500 },
            "after {reattempts} reattempts in a row"
        );
    }
    assert_eq!(
        verb(action, true, 4, 3),
        Verb::Cancel {
            reason: format!("step failed after 4 attempts in a row: {MESSAGE}"),
        },
        "the fourth attempt in a row stalled too"
    );
    assert!(
        matches!(verb(action, true, 9, 8), Verb::Cancel { .. }),
        "a count beyond the bound (a policy's longer streak) is terminal too"
    );
}

#[test]
fn the_terminal_action_is_any_failure_action_and_zero_reattempts_is_terminal_at_once() {
    for (terminal_action, expected) in [
        (FailureAction::Pause, "pause"),
        (FailureAction::Cancel, "cancel"),
        (FailureAction::Skip, "skip"),
    ] {
        let action = StallAction::Reattempt {
            wait: Duration::ZERO,
            max_reattempts: 0,
            terminal_action,
        };
        assert_eq!(verb(action, true, 1, 0).name(), expected);
    }
}

#[test]
fn the_short_form_has_a_policys_defaults() {
    let action = StallAction::reattempt(Duration::from_secs(2));
    assert_eq!(
        action,
        StallAction::Reattempt {
            wait: Duration::from_secs(2),
            max_reattempts: 3,
            terminal_action: FailureAction::Pause,
        }
    );
    assert_eq!(verb(action, true, 3, 2), Verb::Reattempt { wait_ms: 2000 });
    assert_eq!(
        verb(action, true, 4, 3),
        Verb::Pause {
            reason: format!("step failed after 4 attempts in a row: {MESSAGE}"),
        }
    );
}

#[test]
fn pause_cancel_and_an_unregistered_workflow_are_not_counted() {
    let reason = || "attempt 7 of step `charge` stalled (timeout)".to_owned();
    assert_eq!(
        verb(StallAction::Pause, true, 7, 6),
        Verb::Pause { reason: reason() }
    );
    assert_eq!(
        verb(StallAction::Cancel, false, 7, 6),
        Verb::Cancel { reason: reason() }
    );
    // A reattempt needs the step's definition: without it, pause, whatever
    // the count.
    assert_eq!(
        verb(StallAction::reattempt(Duration::ZERO), false, 7, 0),
        Verb::Pause { reason: reason() }
    );
}

#[test]
fn a_stall_is_always_reported_with_its_error() {
    let result = stalled_result(
        StallAction::reattempt(Duration::MAX),
        true,
        "charge",
        1,
        0,
        "worker_lost",
    );
    assert!(result.report);
    assert_eq!(
        result.verb,
        Verb::Reattempt {
            wait_ms: pgbus_core::MAX_DURATION_MS
        },
        "a wait beyond any date is cut"
    );
    let error = result.error.expect("an error");
    assert!(error.class.ends_with("StepStalled"), "{}", error.class);
    assert_eq!(
        error.message,
        "attempt 1 of step `charge` stalled (worker_lost)"
    );
}
