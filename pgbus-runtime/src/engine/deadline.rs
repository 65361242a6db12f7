//! Run deadlines (issue 21): when a run's deadline falls, decided at start
//! from the start's options and the workflow's `deadline`; whether a step of
//! a run may still start; and what a run past its deadline becomes, decided
//! under its lock for the sweep ([`Store::expire_deadlines`]). The stores
//! write and apply what these say.
//!
//! The idea is Temporal's workflow execution timeout: a bound on the whole
//! run, whatever its steps do. A run past its deadline starts no step (the
//! claim and a handoff check [`past_deadline`]), and the sweep cancels or
//! pauses it through the operator path ([`plan_action`], actor
//! [`DEADLINE_ACTOR`]) after a `deadline_exceeded` event. A deadline fires
//! once: the store clears it when it has acted, so a run its deadline paused
//! goes on when an operator resumes it.
//!
//! [`Store::expire_deadlines`]: crate::store::Store::expire_deadlines

use chrono::{DateTime, Utc};

use super::{Action, ActionPlan, ActionRun, EventKind, EventSpec, IllegalMove, plan_action};
use crate::definition::{DeadlineAction, WorkflowDefinition};
use crate::start_options::{StartAt, StartOptions};

/// The actor the sweep records on what a deadline does (the
/// `deadline_exceeded` event, the cancel or pause, a fan-out child's cancel).
pub const DEADLINE_ACTOR: &str = "deadline";

/// When a run's deadline falls, as a start decides it before the store reads
/// its clock: Postgres computes the time in SQL from its own `now` (or the
/// pinned time), the memory store from its virtual clock ([`RunDeadline::at`]),
/// as for [`FirstDue`](super::FirstDue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunDeadline {
    /// At this time ([`StartOptions::deadline`]).
    At(DateTime<Utc>),
    /// `after_ms` milliseconds after the run's start time: `from` (the
    /// start's [`StartOptions::at`]) or the store's now, whichever is later.
    /// A start's [`StartOptions::delay`] is already counted in `after_ms`.
    After {
        /// The start time asked for; `None`: the store's now.
        from: Option<DateTime<Utc>>,
        /// Milliseconds from the start time.
        after_ms: u64,
    },
}

impl RunDeadline {
    /// The deadline on a store whose clock says `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match *self {
            Self::At(at) => at,
            Self::After { from, after_ms } => from
                .map_or(now, |from| from.max(now))
                .checked_add_signed(millis(after_ms))
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        }
    }

    /// The parameters the Postgres statements take: `(fixed, from, after_ms)`,
    /// the deadline being `fixed` when `after_ms` is `None`, else
    /// `greatest(coalesce(from, now), now) + after_ms`.
    #[must_use]
    pub fn sql_parts(
        deadline: Option<Self>,
    ) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>, Option<i64>) {
        match deadline {
            None => (None, None, None),
            Some(Self::At(at)) => (Some(at), None, None),
            Some(Self::After { from, after_ms }) => (
                None,
                from,
                Some(i64::try_from(after_ms).unwrap_or(i64::MAX)),
            ),
        }
    }
}

/// A start's deadline: its own ([`StartOptions::deadline`] or
/// [`StartOptions::deadline_after`]) over the workflow's declared `deadline`
/// ([`FlowControl::deadline_ms`](crate::FlowControl::deadline_ms)); `None`
/// when neither gives one. A duration counts from the run's start time: its
/// [`StartOptions::at`] (not before the store's now), or the store's now plus
/// its [`StartOptions::delay`], or the store's now; never from the first
/// step's own `wait`.
#[must_use]
pub fn run_deadline(
    definition: &WorkflowDefinition,
    options: &StartOptions,
) -> Option<RunDeadline> {
    let after_ms = match options.run_deadline() {
        Some(StartAt::At(at)) => return Some(RunDeadline::At(at)),
        Some(StartAt::After(after)) => duration_ms(after),
        None => definition.flow.deadline_ms?,
    };
    Some(match options.start_at() {
        Some(StartAt::At(at)) => RunDeadline::After {
            from: Some(at),
            after_ms,
        },
        Some(StartAt::After(delay)) => RunDeadline::After {
            from: None,
            after_ms: duration_ms(delay).saturating_add(after_ms),
        },
        None => RunDeadline::After {
            from: None,
            after_ms,
        },
    })
}

/// Whether a run whose deadline is `deadline_at` is past it at `now`: no
/// step of it starts (not by a claim, not by a handoff), and the sweep acts
/// on it. A deadline that falls at `now` is past.
#[must_use]
pub fn past_deadline(deadline_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    deadline_at.is_some_and(|deadline| deadline <= now)
}

/// A run's deadline, as the sweep reads it under the run's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineState {
    /// `runs.deadline_at`: `None` when the run has none, or its deadline
    /// already fired.
    pub deadline_at: Option<DateTime<Utc>>,
    /// `runs.on_deadline`.
    pub on_deadline: DeadlineAction,
}

/// Decides what a run's deadline does to it at `now`, `run` read under its
/// lock (as for [`plan_action`]). `Ok(None)`: nothing, because the run has no
/// deadline, it is still ahead, or the run ended (a run that finished just in
/// time is left as it is). Otherwise the operator's cancel or pause as
/// [`plan_action`] plans it, the reason naming the deadline, with a
/// `deadline_exceeded` event (details `{"deadline_at": "<RFC 3339>"}`) before
/// the action's; for a run already paused whose deadline pauses, that event
/// alone and the run as it is (a later resume lets it go on). The store
/// applies the plan as an operator action of [`DEADLINE_ACTOR`] and then
/// clears the deadline.
///
/// # Errors
/// [`IllegalMove`] should [`plan_action`] refuse (it does not for these
/// moves from these states).
pub fn plan_deadline(
    run: &ActionRun,
    deadline: &DeadlineState,
    now: DateTime<Utc>,
) -> Result<Option<ActionPlan>, IllegalMove> {
    let Some(deadline_at) = deadline.deadline_at.filter(|_| !run.status.is_terminal()) else {
        return Ok(None);
    };
    if !past_deadline(Some(deadline_at), now) {
        return Ok(None);
    }
    let at = deadline_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let reason = format!("the run's deadline ({at}) passed");
    let exceeded = EventSpec {
        event: EventKind::DeadlineExceeded,
        about_step: false,
        reason: Some(reason.clone()),
        details: Some(serde_json::json!({ "deadline_at": at })),
    };
    let mut plan = match (deadline.on_deadline, run.status) {
        (DeadlineAction::Pause, super::RunStatus::Paused) => ActionPlan {
            run_status: run.status,
            current_step: run.current_step.clone(),
            skip_latest: false,
            clear_error: false,
            cancel_open_steps: false,
            next: None,
            events: Vec::new(),
        },
        (DeadlineAction::Pause, _) => plan_action(Action::Pause, run, &reason)?,
        (DeadlineAction::Cancel, _) => plan_action(Action::Cancel, run, &reason)?,
    };
    plan.events.insert(0, exceeded);
    Ok(Some(plan))
}

/// What [`StartOptions::check`] holds a start's deadline to, `now` being the
/// store's clock: a time after the run's start time and at most
/// [`MAX_DURATION_MS`](pgbus_core::MAX_DURATION_MS) (36,500 days) after it;
/// a duration over zero and at most that.
///
/// # Errors
/// What is wrong, with the option's name: `deadline` or `deadline_after`.
pub(crate) fn check_deadline(
    options: &StartOptions,
    now: DateTime<Utc>,
) -> Result<(), (&'static str, String)> {
    let max = pgbus_core::MAX_DURATION_MS;
    match options.run_deadline() {
        None => Ok(()),
        Some(StartAt::After(after)) => {
            if after.is_zero() {
                Err(("deadline_after", "must be longer than 0".to_owned()))
            } else if after.as_millis() > u128::from(max) {
                Err((
                    "deadline_after",
                    format!(
                        "must be at most 36500 days (`36500d`), as every pgbus duration; got {after:?}"
                    ),
                ))
            } else {
                Ok(())
            }
        }
        Some(StartAt::At(at)) => {
            let start = match options.start_at() {
                Some(StartAt::At(start)) => start.max(now),
                Some(StartAt::After(delay)) => now
                    .checked_add_signed(millis(duration_ms(delay)))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC),
                None => now,
            };
            let text =
                |time: DateTime<Utc>| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            if at <= start {
                Err((
                    "deadline",
                    format!(
                        "must be after the run's start time ({}); got {}",
                        text(start),
                        text(at)
                    ),
                ))
            } else if (at - start).num_milliseconds() > i64::try_from(max).unwrap_or(i64::MAX) {
                Err((
                    "deadline",
                    format!(
                        "must be at most 36500 days after the run's start time ({}); got {}",
                        text(start),
                        text(at)
                    ),
                ))
            } else {
                Ok(())
            }
        }
    }
}

/// A duration in whole milliseconds, saturating.
fn duration_ms(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds as a chrono duration, saturating.
fn millis(ms: u64) -> chrono::Duration {
    chrono::Duration::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
