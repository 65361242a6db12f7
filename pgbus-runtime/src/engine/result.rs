//! How an attempt ended, as the engine takes it: the verb, the error record, the
//! output, and what the `wait_for` gate decided.

use serde_json::Value;

use super::{Park, Verb};
use crate::context::SignalId;
use crate::error::StepError;

/// An error as the step row and the run row keep it: type name, message (capped)
/// and causes (capped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorRecord {
    /// The Rust type name, e.g. `my_app::CardDeclined`.
    pub class: String,
    /// The message, at most 10,000 characters.
    pub message: String,
    /// The `source()` chain, nearest first, at most 5.
    pub causes: Vec<String>,
}

impl ErrorRecord {
    /// Captures an error.
    #[must_use]
    pub fn of(error: &StepError) -> Self {
        Self {
            class: error.type_name().to_owned(),
            message: error.message(),
            causes: error.causes(),
        }
    }
}

/// How an attempt ended: the verb to apply, the error if the attempt failed, the
/// output it recorded, and whether the error is to be reported.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptResult {
    /// What happens next.
    pub verb: Verb,
    /// The error, when the body, a guard or the engine failed the attempt.
    pub error: Option<ErrorRecord>,
    /// The step's output (`cx.output(..)`), stored on the step row.
    pub output: Option<Value>,
    /// Whether the error is reported (tracing error event and the error hook).
    pub report: bool,
    /// The error of an exception handler that failed (the run pauses); always
    /// reported, after the outcome is committed.
    pub handler_error: Option<ErrorRecord>,
    /// What the `wait_for` gate decided, for a step that waits for a signal.
    pub gate: Option<Gate>,
    /// Set when the attempt does not end but parks its row as `waiting` (for a
    /// signal or a batch); `verb` and `error` are then not applied.
    pub park: Option<Park>,
}

impl AttemptResult {
    /// An attempt that ended with a verb and no error.
    #[must_use]
    pub const fn ok(verb: Verb, output: Option<Value>) -> Self {
        Self {
            verb,
            error: None,
            output,
            report: false,
            handler_error: None,
            gate: None,
            park: None,
        }
    }

    /// An attempt that parks its row (same attempt) until a signal or its batch
    /// wakes it. `output` is stored on the row now (a fan_out body's output).
    #[must_use]
    pub const fn parked(park: Park, output: Option<Value>) -> Self {
        Self {
            verb: Verb::Complete,
            error: None,
            output,
            report: false,
            handler_error: None,
            gate: None,
            park: Some(park),
        }
    }

    /// An attempt that failed with `error`, to apply `verb`.
    #[must_use]
    pub fn failed(verb: Verb, error: &StepError, report: bool) -> Self {
        Self {
            verb,
            error: Some(ErrorRecord::of(error)),
            output: None,
            report,
            handler_error: None,
            gate: None,
            park: None,
        }
    }
}

/// What the `wait_for` gate decided for an attempt that goes on to an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The attempt took this signal; its body saw it in
    /// [`StepCx::signal`](crate::StepCx::signal).
    Signal {
        /// The signal.
        id: SignalId,
        /// Whether this attempt consumes it (`false`: an earlier attempt of the
        /// same step consumed it, and a reattempt sees the same signal).
        fresh: bool,
    },
    /// `wait_timeout` passed with no matching signal; `on_timeout` applied.
    TimedOut,
}
