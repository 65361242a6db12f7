//! The error types pgbus itself puts into a [`StepError`](super::StepError): a
//! plain message, and what the engine raises into a step.

use std::time::Duration;

/// A plain message error, from [`StepError::msg`].
///
/// [`StepError::msg`]: super::StepError::msg
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Message(pub String);

/// A step body ran past its `timeout`. Match it in a policy with
/// `on_exception(matching(Timeout), ...)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step ran past its timeout of {after:?}")]
#[non_exhaustive]
pub struct Timeout {
    /// The step's timeout.
    pub after: Duration,
}

/// A step body (or a guard or handler) panicked; the panic is caught and handled
/// as this error, so policies apply and the worker lives on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step panicked: {message}")]
#[non_exhaustive]
pub struct Panicked {
    /// The panic's message, when it was a string.
    pub message: String,
}

/// The run's input did not deserialize into the workflow's input type.
#[derive(Debug, thiserror::Error)]
#[error("the run's input is not a valid `{input_type}`")]
#[non_exhaustive]
pub struct BadInput {
    /// The workflow's input type, as written.
    pub input_type: &'static str,
    /// What serde said.
    #[source]
    pub source: serde_json::Error,
}

/// The attempt's outcome could not be stored as it was (an output or text that
/// Postgres refuses), or the run's stored input, outputs or signals cannot be read back
/// (JSON nested deeper than the driver reads); the run is paused with this error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the step's outcome could not be stored or its data read: {reason}")]
#[non_exhaustive]
pub struct Unstorable {
    /// What Postgres or the driver said.
    pub reason: String,
}

/// The sweep found the attempt stalled: past its `stall_at` (`timeout`) or
/// claimed by a worker that stopped heartbeating (`worker_lost`). Applied with the
/// worker's stall action and a `stall_detected` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("attempt {attempt} of step `{step}` stalled ({detection})")]
#[non_exhaustive]
pub struct StepStalled {
    /// `timeout` or `worker_lost`.
    pub detection: String,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: i32,
}

/// A `wait_for` step's `wait_timeout` passed with no matching signal. The step
/// row keeps it as its error, whatever `on_timeout` says (`run` excepted: the
/// body runs and its own result is recorded); with `pause`, resuming the run runs
/// a new attempt that waits again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step `{step}` waited {waited} for signal `{signal}`, which did not come")]
#[non_exhaustive]
pub struct WaitTimedOut {
    /// The step.
    pub step: String,
    /// The signal it waited for.
    pub signal: String,
    /// Its `wait_timeout`, as written in the duration grammar (`1h`, `90s`).
    pub waited: String,
}

/// A fan_out step's batch ended with cancelled children. Applied with the step's
/// `on_batch_failure` (default pause); a resume or reattempt starts a fresh batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "fan_out step `{step}`: {cancelled} of {total} child runs were cancelled ({finished} finished)"
)]
#[non_exhaustive]
pub struct FanOutFailed {
    /// The step.
    pub step: String,
    /// The batch's id (`batches.id`).
    pub batch_id: i64,
    /// Children in the batch.
    pub total: i32,
    /// Children that finished.
    pub finished: i32,
    /// Children that were cancelled.
    pub cancelled: i32,
}

/// A run reached a step its workflow's definition does not have (a deploy removed
/// or renamed it without a `removed_step!` gravestone), or the engine asked for a
/// guard or handler the definition does not list. The run is paused, never retried
/// in a loop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workflow `{workflow}` has no step `{step}`")]
pub struct StepNotDefined {
    /// The workflow's name.
    pub workflow: String,
    /// The step, guard or handler that was asked for.
    pub step: String,
}
