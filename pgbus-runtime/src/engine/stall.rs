//! Ending a stalled attempt: what the sweep does with it.

use std::time::Duration;

use pgbus_core::MAX_DURATION_MS;
use pgbus_core::defaults::DEFAULT_MAX_REATTEMPTS;

use super::{AttemptResult, Verb};
use crate::definition::FailureAction;
use crate::error::StepError;

/// What the sweep does with a stalled attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StallAction {
    /// Pause the run (the default); an operator decides.
    #[default]
    Pause,
    /// Run the step again after `wait`, bounded as a reattempt policy is: at
    /// most `max_reattempts` reattempts in a row, then `terminal_action`, so
    /// an input that hangs or kills its worker every time ends. Only for
    /// workflows the sweeping worker registered; others are paused.
    /// [`StallAction::reattempt`] builds one with a policy's defaults.
    Reattempt {
        /// Delay before the new attempt.
        wait: Duration,
        /// How many reattempts in a row the stall action grants (the body
        /// runs at most `max_reattempts + 1` times in a row). Counted as a
        /// policy counts them: the step's consecutive reattempted attempts,
        /// whatever reattempted them (a policy, the body's own
        /// `Flow::Reattempt`, an earlier stall); an operator's resume starts
        /// the count again.
        max_reattempts: u32,
        /// What the stall after the last reattempt does (a policy's
        /// `terminal_action`).
        terminal_action: FailureAction,
    },
    /// Cancel the run.
    Cancel,
}

impl StallAction {
    /// [`StallAction::Reattempt`] after `wait`, with a reattempt policy's
    /// defaults: at most [`DEFAULT_MAX_REATTEMPTS`] (3) reattempts in a row,
    /// then pause.
    #[must_use]
    pub const fn reattempt(wait: Duration) -> Self {
        Self::Reattempt {
            wait,
            max_reattempts: DEFAULT_MAX_REATTEMPTS,
            terminal_action: FailureAction::Pause,
        }
    }
}

/// How the sweep ends a stalled attempt: with a
/// [`StepStalled`](crate::StepStalled) error (always reported) and the stall
/// action's verb. `registered` says whether the sweeper has the workflow's
/// own definition (a reattempt needs it; without, the run pauses);
/// `reattempts` is the claim's count of reattempts in a row before this
/// attempt, which bounds a reattempt; `detection` is `timeout` or
/// `worker_lost`. Both stores' sweeps decide through this one function.
#[must_use]
pub fn stalled_result(
    action: StallAction,
    registered: bool,
    step: &str,
    attempt: i32,
    reattempts: i32,
    detection: &str,
) -> AttemptResult {
    let error = StepError::from(crate::StepStalled {
        detection: detection.to_owned(),
        step: step.to_owned(),
        attempt,
    });
    let verb = stall_verb(action, registered, reattempts, &error.message());
    AttemptResult::failed(verb, &error, true)
}

/// How the sweep's grace rule ends a due row that no live worker can run
/// (see [`Store::undefined_steps`](crate::store::Store::undefined_steps)):
/// with a [`StepNotDefined`](crate::StepNotDefined) error (always reported)
/// and a pause, as a worker's claim of a step its definition lacked did
/// before claims filtered on the definition. An operator's resume runs the
/// step again as a new attempt, once a worker that has it is live.
#[must_use]
pub fn undefined_result(workflow: &str, step: &str) -> AttemptResult {
    let error = StepError::from(crate::StepNotDefined {
        workflow: workflow.to_owned(),
        step: step.to_owned(),
    });
    AttemptResult::failed(
        Verb::Pause {
            reason: format!("no live worker's definition of `{workflow}` has step `{step}`"),
        },
        &error,
        true,
    )
}

/// The stall action's verb for an attempt after `reattempts` reattempts in a
/// row, `message` being the stall's: cancel; a reattempt while
/// `max_reattempts` is not used up, then the terminal action (its reason
/// saying how many attempts in a row failed, as a policy's does); pause. A
/// reattempt needs the workflow's own definition, so without it
/// (`registered` false) the run pauses instead.
fn stall_verb(action: StallAction, registered: bool, reattempts: i32, message: &str) -> Verb {
    match action {
        StallAction::Cancel => Verb::Cancel {
            reason: message.to_owned(),
        },
        StallAction::Reattempt {
            wait,
            max_reattempts,
            terminal_action,
        } if registered => {
            let used = u32::try_from(reattempts).unwrap_or(0);
            if used >= max_reattempts {
                Verb::from_failure_action(
                    terminal_action,
                    format!(
                        "step failed after {} attempts in a row: {message}",
                        used.saturating_add(1)
                    ),
                )
            } else {
                Verb::Reattempt {
                    wait_ms: u64::try_from(wait.as_millis())
                        .unwrap_or(u64::MAX)
                        .min(MAX_DURATION_MS),
                }
            }
        }
        StallAction::Reattempt { .. } | StallAction::Pause => Verb::Pause {
            reason: message.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests;
