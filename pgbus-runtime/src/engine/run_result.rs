//! A run's result: which value it is, and whether a wait for it is over.
//!
//! The rule: a finished run's result is the output of its latest attempt,
//! the one whose end finished it (the last step of its plan, or a step that
//! returned `Flow::Finish`), when that attempt completed or was skipped; it
//! is JSON `null` when the attempt recorded no output, or failed (an error a
//! policy skipped past, an operator's skip of a failed step). `null` decodes
//! as `()` and as `Option`'s `None`, and into any other type is
//! [`Error::ResultDecode`]. One rule a user can predict from the run's last
//! row alone, which costs no write: the output is on the row already.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{RunStatus, StepStatus};
use crate::error::Error;
use crate::view::{LastAttempt, ResultView};

/// What a wait for a run's result does when it finds the run paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnPause {
    /// Return [`Error::RunPaused`] at once (the default): a paused run waits
    /// for a person, and a caller had better learn so now than at its
    /// timeout.
    #[default]
    Return,
    /// Wait on, as for a running run (an operator may resume it); a run
    /// still paused when the wait's timeout comes is [`Error::RunPaused`],
    /// not [`Error::ResultTimeout`].
    Wait,
}

/// The result of a finished run whose latest attempt is `last`, as JSON (see
/// the module's rule).
#[must_use]
pub fn result_value(last: Option<&LastAttempt>) -> Value {
    match last {
        Some(attempt) if matches!(attempt.status, StepStatus::Completed | StepStatus::Skipped) => {
            attempt.output.clone().unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

/// Whether a wait for `view`'s run is over: `None` while it runs (or is
/// paused, with [`OnPause::Wait`]); else its result as JSON, or
/// [`Error::RunCancelled`] or [`Error::RunPaused`].
#[must_use]
pub fn settle_result(view: &ResultView, on_pause: OnPause) -> Option<Result<Value, Error>> {
    match view.status {
        RunStatus::Finished => Some(Ok(result_value(view.last_attempt.as_ref()))),
        RunStatus::Cancelled => Some(Err(Error::RunCancelled {
            run_id: view.run_id,
            reason: view.reason.clone(),
        })),
        RunStatus::Paused if on_pause == OnPause::Return => Some(Err(paused(view))),
        RunStatus::Paused | RunStatus::Ready | RunStatus::Performing => None,
    }
}

/// [`settle_result`], decoded into `T` (see [`decode_result`]).
#[must_use]
pub fn settle_result_as<T: DeserializeOwned>(
    view: &ResultView,
    on_pause: OnPause,
) -> Option<Result<T, Error>> {
    settle_result(view, on_pause)
        .map(|settled| settled.and_then(|value| decode_result(view, value)))
}

/// `value`, the result of `view`'s run, as `T`; [`Error::ResultDecode`]
/// naming the run, the attempt and `T` when it is not one.
///
/// # Errors
/// [`Error::ResultDecode`].
pub fn decode_result<T: DeserializeOwned>(view: &ResultView, value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|source| Error::ResultDecode {
        run_id: view.run_id,
        step: view.last_attempt.as_ref().map(|a| a.step_name.clone()),
        output_type: std::any::type_name::<T>(),
        source,
    })
}

/// What a wait that ran out of time after `waited` returns, `view` being the
/// run as last read: [`Error::RunPaused`] for a paused run (a wait with
/// [`OnPause::Wait`] ends so), else [`Error::ResultTimeout`].
#[must_use]
pub fn result_timed_out(view: &ResultView, waited: Duration) -> Error {
    if view.status == RunStatus::Paused {
        return paused(view);
    }
    Error::ResultTimeout {
        run_id: view.run_id,
        status: view.status,
        waited,
    }
}

fn paused(view: &ResultView) -> Error {
    Error::RunPaused {
        run_id: view.run_id,
        reason: view.reason.clone(),
        error_class: view.error_class.clone(),
        error_message: view.error_message.clone(),
    }
}

#[cfg(test)]
mod tests;
