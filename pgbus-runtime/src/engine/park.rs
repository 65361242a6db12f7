//! Parking an attempt as `waiting`, for a signal or a batch of child runs,
//! instead of ending it.

use pgbus_core::MAX_DURATION_MS;
use serde_json::Value;

use super::plan::step_event;
use super::{EventKind, EventSpec, RunState, RunStatus};
use crate::context::SignalId;
use crate::fan_out::ChildRun;

/// Why an attempt parks its row as `waiting` instead of ending.
#[derive(Debug, Clone, PartialEq)]
pub enum Park {
    /// No matching signal yet: wait for signal `name`, until `timeout_ms` after
    /// the row first parked (forever without one).
    Signal {
        /// The signal name.
        name: String,
        /// The highest signal id the gate turned down (its predicate said no
        /// to it and to every unconsumed one before it), if it looked at any.
        /// An unconsumed signal above it when the row parks (one that arrived
        /// meanwhile, or one past the page the claim brought) wakes the row at
        /// once, so no wake-up is lost; later claims bring only signals above
        /// it.
        turned_down_to: Option<SignalId>,
        /// The `wait_timeout`, in milliseconds.
        timeout_ms: Option<u64>,
    },
    /// A fan_out body started these children (never none): create them with
    /// their batch and wait for it.
    Batch {
        /// The children, in the order the body added them.
        children: Vec<ChildRun>,
    },
    /// The step's batch was open at the claim: go on waiting for it. Should it
    /// have resolved since, the row is woken at once.
    BatchOpen {
        /// The batch.
        batch_id: i64,
        /// Whether an earlier attempt of the step started it: this row takes
        /// it over, and its last child wakes this row.
        adopt: bool,
    },
}

impl Park {
    /// What a parked row waits for and until when, as both stores write it.
    #[must_use]
    pub fn wait(&self) -> ParkWait<'_> {
        let forever = ParkWait {
            signal: None,
            turned_down_to: None,
            due_ms: MAX_DURATION_MS,
            from_first_park: false,
            batch_id: None,
            adopt: false,
        };
        match self {
            Self::Signal {
                name,
                turned_down_to,
                timeout_ms,
            } => ParkWait {
                signal: Some(name),
                turned_down_to: *turned_down_to,
                due_ms: timeout_ms.unwrap_or(MAX_DURATION_MS),
                from_first_park: timeout_ms.is_some(),
                ..forever
            },
            Self::Batch { .. } => forever,
            Self::BatchOpen { batch_id, adopt } => ParkWait {
                batch_id: Some(*batch_id),
                adopt: *adopt,
                ..forever
            },
        }
    }
}

/// The row a park leaves: what it waits for and when it is due again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkWait<'a> {
    /// The signal name it waits for (`None`: its batch).
    pub signal: Option<&'a str>,
    /// The highest signal id the gate turned down, if any.
    pub turned_down_to: Option<SignalId>,
    /// Milliseconds until it is due again: its `wait_timeout`, or 36500 days
    /// (it parks again then) for a wait without one.
    pub due_ms: u64,
    /// Whether `due_ms` counts from the row's first park (a `wait_timeout`)
    /// rather than from now.
    pub from_first_park: bool,
    /// The batch it goes on waiting for, for a row claimed while it was open.
    pub batch_id: Option<i64>,
    /// Whether that batch is an earlier attempt's, which this row takes over.
    pub adopt: bool,
}

/// A signal as the gate sees it at a claim: one of the run's signals of the
/// name the step waits for, not consumed or consumed by an earlier attempt of the
/// same step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSignal {
    /// The signal.
    pub id: SignalId,
    /// Its name.
    pub name: String,
    /// Its payload.
    pub payload: Value,
    /// Whether an earlier attempt of this step consumed it.
    pub taken_before: bool,
}

/// A fan_out attempt's batch as the claim found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchState {
    /// The batch (`batches.id`).
    pub id: i64,
    /// Children in it.
    pub total: i32,
    /// Children that finished.
    pub finished: i32,
    /// Children that were cancelled.
    pub cancelled: i32,
    /// Whether children are still running.
    pub open: bool,
    /// Whether this attempt started it (else an earlier attempt of the step
    /// did).
    pub own: bool,
    /// The output of the attempt that started it (its body's, stored when it
    /// parked): an attempt that takes the batch over keeps it.
    pub output: Option<Value>,
}

impl BatchState {
    /// Whether it ended with cancelled children.
    #[must_use]
    pub const fn failed(&self) -> bool {
        !self.open && self.cancelled > 0
    }
}

/// What parking an attempt changes: the run's status (`ready`, or `paused` when
/// an operator paused it meanwhile: a run whose step waits stays `ready`) and
/// the events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkPlan {
    /// The run's new status.
    pub run_status: RunStatus,
    /// Events, in order.
    pub events: Vec<EventSpec>,
}

/// Decides what parking an attempt changes. `run` was read under its lock.
#[must_use]
pub fn plan_park(run: &RunState, park: &Park) -> ParkPlan {
    let run_status = if run.status == RunStatus::Paused {
        RunStatus::Paused
    } else {
        RunStatus::Ready
    };
    let reason = match park {
        Park::Signal { name, .. } => format!("signal `{name}`"),
        Park::Batch { children } => format!("a batch of {} child runs", children.len()),
        Park::BatchOpen { .. } => "its batch of child runs".to_owned(),
    };
    ParkPlan {
        run_status,
        events: vec![step_event(EventKind::StepWaiting, Some(reason))],
    }
}

/// Whether a wait that began at `since` with `timeout_ms` has ended at `now`
/// (all on the store's clock). A row that never parked has not begun waiting.
#[must_use]
pub fn wait_expired(
    since: Option<chrono::DateTime<chrono::Utc>>,
    timeout_ms: Option<u64>,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    match (since, timeout_ms) {
        (Some(since), Some(ms)) => {
            let ms = i64::try_from(ms.min(MAX_DURATION_MS)).unwrap_or(i64::MAX);
            since
                .checked_add_signed(chrono::Duration::milliseconds(ms))
                .is_some_and(|deadline| deadline <= now)
        }
        _ => false,
    }
}
