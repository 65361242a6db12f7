//! Schedules' decisions: which ticks a fire starts runs for (the catch-up
//! policy), what a change or a declaration in code does to a stored schedule.
//! The stores lock, fence and write what these decide.

use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};

use crate::context::{Limits, RunId};
use crate::error::Error;
use crate::schedule::{
    CatchUp, Cron, FirePlan, MISSED_TICK_THRESHOLD_MS, Schedule, ScheduleChange, ScheduleOrigin,
    ScheduleSpec, ScheduleView,
};

/// How many missed ticks a fire counts at most for
/// [`ScheduleView::ticks_skipped`] (a per-second schedule after a day's outage
/// has 86,400): past it the count is a lower bound.
pub const MAX_COUNTED_TICKS: usize = 10_000;

/// Who pauses a schedule this version cannot fire (an expression, zone or
/// catch-up policy that no longer reads, written by hand or by another
/// version).
pub const SCHEDULE_ACTOR: &str = "pgbus";

/// What firing `schedule` at `now` does, at most `max_ticks` runs: `Ok(None)`
/// when nothing is due (paused, no tick ahead, or the next tick after `now`).
///
/// The ticks from `next_tick_at` up to `now` are due. When the oldest was
/// found within [`MISSED_TICK_THRESHOLD_MS`] of its time, each starts a run
/// (at most `max_ticks`; the rest on the next pass). Otherwise they were
/// missed and the schedule's [`CatchUp`] decides: `skip` starts none, `one`
/// starts one for the latest, `all(N)` one for each of the latest N, oldest
/// first (and at most `max_ticks` per pass); then the schedule goes on from
/// the first tick after `now`. Missed ticks without a run are counted in
/// [`FirePlan::skipped`] (up to [`MAX_COUNTED_TICKS`]).
///
/// # Errors
/// The reason, when the stored expression, zone or policy does not read (the
/// store pauses the schedule with it).
pub fn fire_plan(
    schedule: &ScheduleView,
    now: DateTime<Utc>,
    max_ticks: usize,
) -> Result<Option<FirePlan>, String> {
    let Some(next) = schedule.next_tick_at else {
        return Ok(None);
    };
    if schedule.is_paused() || next > now || max_ticks == 0 {
        return Ok(None);
    }
    let cron = Cron::parse(&schedule.expression, &schedule.timezone).map_err(|e| e.to_string())?;
    let catch_up: CatchUp = schedule.catch_up.parse().map_err(|e| format!("{e}"))?;
    let missed = now.signed_duration_since(next) > Duration::milliseconds(MISSED_TICK_THRESHOLD_MS);
    let just_before = next - Duration::nanoseconds(1);
    if !missed {
        let ticks = cron.ticks_between(just_before, now, max_ticks);
        let next_tick_at = match ticks.last() {
            Some(last) => cron.next_after(*last),
            // `next_tick_at` was no tick of the expression (written by hand):
            // go on from now.
            None => cron.next_after(now),
        };
        return Ok(Some(FirePlan {
            expected: next,
            ticks,
            next_tick_at,
            skipped: 0,
            missed: false,
        }));
    }
    let due = count(&cron, just_before, now);
    let window = match catch_up {
        CatchUp::Skip => Vec::new(),
        CatchUp::One => latest(&cron, just_before, now, 1),
        CatchUp::All(limit) => latest(&cron, just_before, now, limit as usize),
    };
    let skipped = i64::try_from(due.saturating_sub(window.len())).unwrap_or(i64::MAX);
    let ticks: Vec<_> = window.iter().copied().take(max_ticks).collect();
    let next_tick_at = if ticks.len() < window.len() {
        // The rest of the window on the next pass.
        ticks.last().and_then(|last| cron.next_after(*last))
    } else {
        cron.next_after(now)
    };
    Ok(Some(FirePlan {
        expected: next,
        ticks,
        next_tick_at,
        skipped,
        missed: true,
    }))
}

/// How many ticks fall after `after` up to `until`, at most
/// [`MAX_COUNTED_TICKS`].
fn count(cron: &Cron, after: DateTime<Utc>, until: DateTime<Utc>) -> usize {
    cron.ticks_between(after, until, MAX_COUNTED_TICKS).len()
}

/// The latest `n` ticks after `after` up to `until`, oldest first: a window
/// back from `until` doubling from one second, so a long outage is not walked
/// tick by tick from its start.
fn latest(cron: &Cron, after: DateTime<Utc>, until: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let mut span = Duration::seconds(1);
    loop {
        let start = until.checked_sub_signed(span).unwrap_or(after).max(after);
        let mut kept = VecDeque::with_capacity(n);
        let mut last = start;
        while let Some(tick) = cron.next_after(last).filter(|tick| *tick <= until) {
            if kept.len() == n {
                kept.pop_front();
            }
            kept.push_back(tick);
            last = tick;
        }
        if kept.len() >= n || start == after {
            return kept.into();
        }
        span = span.checked_mul(2).unwrap_or(Duration::MAX);
    }
}

/// `schedule` after a fire applied `plan` at `now`, starting `runs` (tick, run,
/// created).
pub fn fired(
    schedule: &mut ScheduleView,
    plan: &FirePlan,
    runs: &[(DateTime<Utc>, RunId, bool)],
    now: DateTime<Utc>,
) {
    schedule.next_tick_at = plan.next_tick_at;
    if let Some((tick, run_id, _)) = runs.last() {
        schedule.last_tick_at = Some(*tick);
        schedule.last_run_id = Some(*run_id);
    }
    schedule.last_fired_at = Some(now);
    schedule.ticks_skipped = schedule.ticks_skipped.saturating_add(plan.skipped);
    schedule.updated_at = now;
}

/// `schedule` paused by pgbus itself, with `reason`: a row this version cannot
/// fire ([`fire_plan`]'s error) stops instead of failing every pass.
pub fn pause_unreadable(schedule: &mut ScheduleView, reason: &str, now: DateTime<Utc>) {
    schedule.paused_at = Some(now);
    schedule.paused_by = Some(SCHEDULE_ACTOR.to_owned());
    schedule.paused_reason = Some(crate::error::cap_message(&format!(
        "this version cannot fire it: {reason}"
    )));
    schedule.updated_at = now;
}

/// Applies `change` to `schedule` at `now`.
///
/// # Errors
/// [`Error::ScheduleDeclaredInCode`] for an update of a schedule declared in
/// code; [`Error::InvalidSchedule`] for an update whose values do not check
/// (see [`ScheduleSpec::new`]); [`Error::IllegalScheduleChange`] for a pause of
/// a paused schedule or a resume of one that is not; [`Error::InvalidActor`],
/// [`Error::InvalidReason`] for a pause's.
pub fn change_schedule(
    schedule: &mut ScheduleView,
    change: &ScheduleChange,
    now: DateTime<Utc>,
    limits: &Limits,
) -> Result<(), Error> {
    let illegal = |why: &str| Error::IllegalScheduleChange {
        name: schedule.name.clone(),
        why: why.to_owned(),
    };
    match change {
        ScheduleChange::Update(update) => {
            if schedule.origin == ScheduleOrigin::Code {
                return Err(Error::ScheduleDeclaredInCode {
                    name: schedule.name.clone(),
                    workflow: schedule.workflow.clone(),
                });
            }
            let catch_up = match update.catch_up {
                Some(catch_up) => catch_up,
                None => {
                    schedule
                        .catch_up
                        .parse()
                        .map_err(|e: crate::schedule::ScheduleError| Error::InvalidSchedule {
                            name: schedule.name.clone(),
                            field: e.field(),
                            reason: e.to_string(),
                        })?
                }
            };
            let merged = Schedule::cron(
                update
                    .expression
                    .clone()
                    .unwrap_or_else(|| schedule.expression.clone()),
            )
            .timezone(
                update
                    .timezone
                    .clone()
                    .unwrap_or_else(|| schedule.timezone.clone()),
            )
            .catch_up(catch_up);
            let input = update
                .input
                .clone()
                .unwrap_or_else(|| schedule.input.clone());
            let spec =
                ScheduleSpec::new(&schedule.name, &schedule.workflow, &merged, input, limits)?;
            spec.cron.expression().clone_into(&mut schedule.expression);
            spec.cron.zone().clone_into(&mut schedule.timezone);
            schedule.catch_up = spec.catch_up.to_string();
            schedule.input = spec.input;
            schedule.next_tick_at = spec.cron.next_after(now);
        }
        ScheduleChange::Pause { actor, reason } => {
            let reason = crate::client::checked_reason(actor, reason)?;
            if schedule.is_paused() {
                return Err(illegal("it is paused already"));
            }
            schedule.paused_at = Some(now);
            schedule.paused_by = Some(actor.clone());
            schedule.paused_reason = Some(reason);
        }
        ScheduleChange::Resume => {
            if !schedule.is_paused() {
                return Err(illegal("it is not paused"));
            }
            let cron = Cron::parse(&schedule.expression, &schedule.timezone).map_err(|e| {
                Error::InvalidSchedule {
                    name: schedule.name.clone(),
                    field: e.field(),
                    reason: e.to_string(),
                }
            })?;
            schedule.paused_at = None;
            schedule.paused_by = None;
            schedule.paused_reason = None;
            schedule.next_tick_at = cron.next_after(now);
        }
    }
    schedule.updated_at = now;
    Ok(())
}

/// What declaring a schedule in code does to the stored row of its name.
#[derive(Debug, Clone, PartialEq)]
pub enum Declare {
    /// No row: insert this one.
    Insert(ScheduleView),
    /// The row, declared in code, with the declaration's values (and, when the
    /// expression or zone changed, its next tick from now); its pause kept.
    Update(ScheduleView),
    /// The row was created through the client: left alone (a code declaration
    /// never overwrites an operator's schedule; the worker logs it).
    Conflict,
}

/// What declaring `spec` at `now` does to `existing`, the row of its name.
#[must_use]
pub fn declare_schedule(
    existing: Option<&ScheduleView>,
    spec: &ScheduleSpec,
    now: DateTime<Utc>,
) -> Declare {
    let Some(existing) = existing else {
        return Declare::Insert(ScheduleView::new(spec, ScheduleOrigin::Code, now));
    };
    if existing.origin != ScheduleOrigin::Code {
        return Declare::Conflict;
    }
    let mut row = existing.clone();
    let moved = row.expression != spec.cron.expression() || row.timezone != spec.cron.zone();
    let catch_up = spec.catch_up.to_string();
    if moved || row.workflow != spec.workflow || row.catch_up != catch_up || row.input != spec.input
    {
        row.workflow.clone_from(&spec.workflow);
        spec.cron.expression().clone_into(&mut row.expression);
        spec.cron.zone().clone_into(&mut row.timezone);
        row.catch_up = catch_up;
        row.input = spec.input.clone();
        row.updated_at = now;
        if moved {
            row.next_tick_at = spec.cron.next_after(now);
        }
    }
    row.declared_at = Some(now);
    Declare::Update(row)
}

#[cfg(test)]
mod tests;
