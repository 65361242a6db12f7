//! A run as a wait for its result reads it: its status and, once it ended,
//! what the result is made of.

use serde::Serialize;
use serde_json::Value;

use crate::context::RunId;
use crate::engine::{RunStatus, StepStatus};

/// How many of a run's latest events a result read looks through for the
/// event that cancelled or paused it ([`ResultView::reason`]): a bound, so a
/// paused run that keeps receiving signals costs the same read as any other.
/// The event that changed the status is written with the change, so it is
/// among the latest unless over a hundred events followed it.
pub const REASON_EVENTS_READ: i64 = 100;

/// A run as [`Store::run_result`](crate::store::Store::run_result) reads it:
/// what [`engine::settle_result`](crate::engine::settle_result) needs to say
/// whether a wait for the run's result is over, and with what. One row of
/// `runs`, plus for a finished run its latest attempt, and for a cancelled or
/// paused one the reason of the event that did it; both stores read the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultView {
    /// The run.
    pub run_id: RunId,
    /// Its workflow.
    pub workflow: String,
    /// Its status.
    pub status: RunStatus,
    /// For a finished run, its latest attempt (the row with the highest id):
    /// the one whose end finished it. `None` for any other status.
    pub last_attempt: Option<LastAttempt>,
    /// For a cancelled or paused run, the reason of the latest `cancelled`
    /// or `paused` event among its latest [`REASON_EVENTS_READ`] events (an
    /// operator's reason, a `Flow::Cancel`'s or `Flow::Pause`'s, a parent's
    /// cancel cascading to its fan-out children); `None` otherwise, or when
    /// the event gave none.
    pub reason: Option<String>,
    /// The run's error class (a run paused on an error; kept by a cancel).
    pub error_class: Option<String>,
    /// The run's error message.
    pub error_message: Option<String>,
}

/// The attempt that finished a run, as a result read sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastAttempt {
    /// Its durable step name.
    pub step_name: String,
    /// Its attempt number, from 1.
    pub attempt: i32,
    /// How it ended: `completed` (the last step, a `Flow::Finish`),
    /// `skipped` (`skip_if`, `Flow::Skip`, an operator's skip of a held
    /// row) or `failed` (an error a policy skipped past, or an operator's
    /// skip of a failed step).
    pub status: StepStatus,
    /// Its output as stored (`cx.output(..)`); `None` when it recorded none.
    pub output: Option<Value>,
}
