//! What the engine reads about a run and an ended attempt, and the rows and
//! events a plan writes.

use serde_json::Value;

use super::{
    ErrorRecord, EventKind, PlannedStep, RunOverrides, RunStatus, StepOutcome, StepStatus,
};

/// What the engine needs to know about the run when an attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// The run's status, read under its row lock.
    pub status: RunStatus,
    /// The live steps of the definition the run started with, in order (`None`
    /// for runs from before they were recorded): the run advances along them.
    pub step_names: Option<Vec<String>>,
    /// Where each of those steps goes (`None` for runs from before it was
    /// recorded): used for a step the deciding definition lacks.
    pub step_plan: Option<Vec<PlannedStep>>,
    /// The queue and priority the run was started with
    /// ([`StartOptions`](crate::StartOptions)), which replace the workflow's
    /// for each step that names none of its own: where the next row and a
    /// reattempt go.
    pub overrides: RunOverrides,
}

/// What the engine needs to know about the attempt that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptState {
    /// The durable step name.
    pub step_name: String,
    /// The attempt number, from 1.
    pub attempt: i32,
    /// Consecutive reattempts of this step before this attempt.
    pub reattempts: i32,
}

/// A step row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    /// The durable step name.
    pub step_name: String,
    /// The attempt number.
    pub attempt: i32,
    /// Consecutive reattempts before this attempt.
    pub reattempts: i32,
    /// The queue it runs on.
    pub queue: String,
    /// Its priority; lower runs first.
    pub priority: i16,
    /// Its own timeout, if any, in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Delay from now (the store's clock) until it is due, in milliseconds.
    pub delay_ms: u64,
}

/// An event row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Its kind.
    pub event: EventKind,
    /// Whether the event is about the attempt that ended (its step id, name and
    /// attempt are filled in) or about the run.
    pub about_step: bool,
    /// Why, when a verb carried a reason.
    pub reason: Option<String>,
    /// What else the event records (`{"signal_id": 7}`).
    pub details: Option<Value>,
}

/// The changes that one ended attempt makes, applied in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The attempt's final status.
    pub step_status: StepStatus,
    /// The attempt's outcome.
    pub step_outcome: StepOutcome,
    /// The row to schedule next, if any.
    pub next: Option<NewStep>,
    /// The run's new status.
    pub run_status: RunStatus,
    /// The run's `current_step` after the change.
    pub current_step: Option<String>,
    /// Error columns for the run: set when the run pauses on an error, cleared
    /// (`None`) otherwise.
    pub run_error: Option<ErrorRecord>,
    /// Cancel every other open step row of the run.
    pub cancel_open_steps: bool,
    /// Events, in order.
    pub events: Vec<EventSpec>,
}

pub(super) fn step_event(event: EventKind, reason: Option<String>) -> EventSpec {
    EventSpec {
        event,
        about_step: true,
        reason,
        details: None,
    }
}

pub(super) fn run_event(event: EventKind, reason: Option<String>) -> EventSpec {
    EventSpec {
        event,
        about_step: false,
        reason,
        details: None,
    }
}
