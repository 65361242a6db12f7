//! Ending a stalled attempt: what the sweep does with it.

use pgbus_core::MAX_DURATION_MS;

use super::{AttemptResult, Verb};
use crate::error::StepError;

/// What the sweep does with a stalled attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StallAction {
    /// Pause the run (the default); an operator decides.
    #[default]
    Pause,
    /// Run the step again after `wait` (only for workflows the sweeping worker
    /// registered; others are paused).
    Reattempt {
        /// Delay before the new attempt.
        wait: std::time::Duration,
    },
    /// Cancel the run.
    Cancel,
}

/// How the sweep ends a stalled attempt: with a
/// [`StepStalled`](crate::StepStalled) error (always reported) and the stall
/// action's verb. `registered` says whether the sweeper has the workflow's own
/// definition: a reattempt needs it, so without it the run pauses instead.
/// `detection` is `timeout` or `worker_lost`.
#[must_use]
pub fn stalled_result(
    action: StallAction,
    registered: bool,
    step: &str,
    attempt: i32,
    detection: &str,
) -> AttemptResult {
    let error = StepError::from(crate::StepStalled {
        detection: detection.to_owned(),
        step: step.to_owned(),
        attempt,
    });
    let reason = error.message();
    let verb = match action {
        StallAction::Cancel => Verb::Cancel { reason },
        StallAction::Reattempt { wait } if registered => Verb::Reattempt {
            wait_ms: u64::try_from(wait.as_millis())
                .unwrap_or(u64::MAX)
                .min(MAX_DURATION_MS),
        },
        StallAction::Reattempt { .. } | StallAction::Pause => Verb::Pause { reason },
    };
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
