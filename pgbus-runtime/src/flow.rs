//! What a step body returns: a [`Flow`] verb or an error.

use std::time::Duration;

use crate::error::StepError;

/// What a step tells the engine to do next. Each verb maps to a step status, a
/// step outcome ([`StepOutcome`](crate::StepOutcome)) and a run status
/// ([`RunStatus`](crate::RunStatus)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Advance: the next step is scheduled at now + its `wait`, or the run finishes.
    Complete,
    /// End the run now, successfully; later steps do not run.
    Finish,
    /// Pause the run until an operator resumes, skips or cancels it.
    Pause {
        /// Why, for the operator; stored on the event.
        reason: String,
    },
    /// Cancel the run; every open step row is cancelled.
    Cancel {
        /// Why; stored on the event.
        reason: String,
    },
    /// Mark this step skipped and advance as with [`Flow::Complete`].
    Skip {
        /// Why; stored on the event.
        reason: String,
    },
    /// Run this step again as a new attempt at now + `wait`.
    Reattempt {
        /// Delay before the next attempt, counted on the database clock; at
        /// most `36500d`, like every duration option (a longer one is cut to it).
        wait: Duration,
    },
}

impl Flow {
    /// [`Flow::Pause`] with a reason.
    pub fn pause(reason: impl Into<String>) -> Self {
        Self::Pause {
            reason: reason.into(),
        }
    }

    /// [`Flow::Cancel`] with a reason.
    pub fn cancel(reason: impl Into<String>) -> Self {
        Self::Cancel {
            reason: reason.into(),
        }
    }

    /// [`Flow::Skip`] with a reason.
    pub fn skip(reason: impl Into<String>) -> Self {
        Self::Skip {
            reason: reason.into(),
        }
    }

    /// [`Flow::Reattempt`] after `wait`.
    #[must_use]
    pub const fn reattempt(wait: Duration) -> Self {
        Self::Reattempt { wait }
    }
}

/// The result of a step body: `Ok(Flow)` or an error for the exception policies.
pub type StepResult = Result<Flow, StepError>;

/// What a step method may return: `StepResult`, `Result<(), E>`, `Result<Flow, E>`
/// for any `E: Into<StepError>`, a bare `Flow`, or `()`. `Ok(())` and `()` mean
/// [`Flow::Complete`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a step result",
    label = "a step returns `StepResult`, `Result<(), E>`, `Result<Flow, E>`, `Flow` or `()`",
    note = "in `Result<_, E>`, `E` must be a `std::error::Error + Send + Sync + 'static` (or `StepError`)"
)]
pub trait IntoStepResult {
    /// Converts into the engine's shape.
    ///
    /// # Errors
    /// The body's own error, converted into a [`StepError`].
    fn into_step_result(self) -> StepResult;
}

impl IntoStepResult for Flow {
    fn into_step_result(self) -> StepResult {
        Ok(self)
    }
}

impl IntoStepResult for () {
    fn into_step_result(self) -> StepResult {
        Ok(Flow::Complete)
    }
}

impl<E: Into<StepError>> IntoStepResult for Result<Flow, E> {
    fn into_step_result(self) -> StepResult {
        self.map_err(Into::into)
    }
}

impl<E: Into<StepError>> IntoStepResult for Result<(), E> {
    fn into_step_result(self) -> StepResult {
        self.map(|()| Flow::Complete).map_err(Into::into)
    }
}

/// What a `cancel_if`, `skip_if` or `wait_for(matches = ...)` method may return:
/// `bool` or `Result<bool, E>` for any `E: Into<StepError>`. An error goes to the
/// step's exception policies.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a guard result",
    label = "`cancel_if`, `skip_if` and `wait_for(matches = ...)` methods return `bool` or `Result<bool, E>`",
    note = "in `Result<bool, E>`, `E` must be a `std::error::Error + Send + Sync + 'static` (or `StepError`)"
)]
pub trait IntoGuardResult {
    /// Converts into the engine's shape.
    ///
    /// # Errors
    /// The guard's own error, converted into a [`StepError`].
    fn into_guard_result(self) -> Result<bool, StepError>;
}

impl IntoGuardResult for bool {
    fn into_guard_result(self) -> Result<bool, StepError> {
        Ok(self)
    }
}

impl<E: Into<StepError>> IntoGuardResult for Result<bool, E> {
    fn into_guard_result(self) -> Result<bool, StepError> {
        self.map_err(Into::into)
    }
}

/// What an `on_exception(handler = ...)` method may return: a [`Flow`],
/// `Option<Flow>`, or either inside `Result<_, E>`. `None` (no verb) and an error
/// both pause the run; the handler's error is reported.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an exception handler outcome",
    label = "a handler returns `Flow`, `Option<Flow>`, `Result<Flow, E>` or `Result<Option<Flow>, E>`",
    note = "in `Result<_, E>`, `E` must be a `std::error::Error + Send + Sync + 'static` (or `StepError`)"
)]
pub trait IntoHandlerOutcome {
    /// Converts into the engine's shape.
    ///
    /// # Errors
    /// The handler's own error, converted into a [`StepError`].
    fn into_handler_outcome(self) -> Result<Option<Flow>, StepError>;
}

impl IntoHandlerOutcome for Flow {
    fn into_handler_outcome(self) -> Result<Option<Flow>, StepError> {
        Ok(Some(self))
    }
}

impl IntoHandlerOutcome for Option<Flow> {
    fn into_handler_outcome(self) -> Result<Option<Flow>, StepError> {
        Ok(self)
    }
}

impl<E: Into<StepError>> IntoHandlerOutcome for Result<Flow, E> {
    fn into_handler_outcome(self) -> Result<Option<Flow>, StepError> {
        self.map(Some).map_err(Into::into)
    }
}

impl<E: Into<StepError>> IntoHandlerOutcome for Result<Option<Flow>, E> {
    fn into_handler_outcome(self) -> Result<Option<Flow>, StepError> {
        self.map_err(Into::into)
    }
}
