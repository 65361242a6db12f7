//! The engine: pure decisions. Given a definition, the state of a run and of one
//! step attempt, and what the attempt ended with, it returns the changes to make.
//! The Postgres store applies them in one transaction under the run's row lock;
//! the testkit's memory store applies the same plans to its maps.
//!
//! Nothing here does I/O, reads a clock or runs user code.

use crate::definition::{Entry, EntryKind};

mod deadline;
mod deploy;
mod event;
pub mod flow;
mod handoff;
mod operator;
mod outcome;
mod park;
mod plan;
mod resolve;
mod result;
mod run_result;
mod schedule;
mod signal;
mod stall;
mod start;
mod status;
mod step_plan;
mod verb;

pub(crate) use deadline::check_deadline;
pub use deadline::{
    DEADLINE_ACTOR, DeadlineState, RunDeadline, past_deadline, plan_deadline, run_deadline,
};
pub use deploy::{InFlight, LatestRow, NewVersion, Stop, Verdict, VerdictKind, deploy_verdict};
pub use event::EventKind;
pub use handoff::{
    carries_over, continued_claim, handoff_within_limits, hands_off, stall_event, unstorable_result,
};
pub use operator::{Action, ActionPlan, ActionRun, IllegalMove, LatestStep, plan_action};
pub use outcome::plan_outcome;
pub use park::{BatchState, Park, ParkPlan, ParkWait, StoredSignal, plan_park, wait_expired};
pub use plan::{AttemptState, EventSpec, NewStep, Plan, RunState};
pub use resolve::{Resolution, resolve_error};
pub use result::{AttemptResult, ErrorRecord, Gate};
pub use run_result::{
    OnPause, decode_result, result_timed_out, result_value, settle_result, settle_result_as,
};
pub use schedule::{
    Declare, MAX_COUNTED_TICKS, SCHEDULE_ACTOR, change_schedule, declare_schedule, fire_plan,
    fired, pause_unreadable,
};
pub use signal::{LISTED_SIGNAL_NAMES, SignalCheck, check_signal_target, describe_unknown_signal};
pub use stall::{StallAction, stalled_result, undefined_result};
pub use start::{
    BulkSlot, BulkStart, FirstDue, RunOverrides, StartPlan, bulk_slots, check_bulk,
    check_bulk_count, first_due, plan_bulk, plan_start,
};
pub use status::{BatchStatus, RunStatus, StepOutcome, StepStatus, UnknownStatus};
pub use step_plan::{
    PlanEntry, PlannedStep, first_attempt, first_attempt_for, live_step_names, plan_entries,
    run_step_plan, step_plan,
};
pub use verb::Verb;

/// Whether an entry is a gravestone: a row for it is skipped, not run.
#[must_use]
pub fn is_removed(entry: &Entry) -> bool {
    entry.kind == EntryKind::Removed
}

#[cfg(test)]
mod tests;
