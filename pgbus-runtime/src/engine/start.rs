//! Starting a run with options: where its steps go (the run's queue and
//! priority replacing the workflow's), when its first step is due, its
//! deadline, and which starts of one bulk call share a run. Both stores start runs with these
//! decisions; they only write what they say.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{NewStep, PlannedStep, first_attempt_for, live_step_names, run_step_plan};
use crate::definition::WorkflowDefinition;
use crate::error::Error;
use crate::start_options::{StartAt, StartOptions};

/// The queue and priority a run was started with
/// ([`StartOptions::queue`], [`StartOptions::priority`]), kept on the run
/// (`runs.queue_override`, `runs.priority_override`). Each replaces the
/// workflow's `queue`/`priority` for every step of the run that names none of
/// its own; a step's own option wins. `None`: the workflow's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RunOverrides {
    /// The run's queue.
    pub queue: Option<String>,
    /// The run's priority; lower runs first.
    pub priority: Option<i16>,
}

impl RunOverrides {
    /// The overrides `options` asks for.
    #[must_use]
    pub fn of(options: &StartOptions) -> Self {
        Self {
            queue: options.run_queue().map(str::to_owned),
            priority: options.run_priority(),
        }
    }
}

/// When a run's first row is due, as a store computes it from its own clock:
/// `max(now, not_before.unwrap_or(now) + delay_ms)`. Postgres computes it in
/// SQL from `clock_timestamp()` (or the pinned time); the memory store from
/// its virtual clock ([`FirstDue::at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstDue {
    /// The time asked for ([`StartOptions::at`]), while it may still be
    /// ahead; `None`: count from now.
    pub not_before: Option<DateTime<Utc>>,
    /// Milliseconds after `not_before` (or now): the first step's `wait`,
    /// plus the start's [`StartOptions::delay`].
    pub delay_ms: u64,
}

impl FirstDue {
    /// The due time on a store whose clock says `now`; never before `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let delay =
            chrono::Duration::milliseconds(i64::try_from(self.delay_ms).unwrap_or(i64::MAX));
        let due = self
            .not_before
            .unwrap_or(now)
            .checked_add_signed(delay)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        due.max(now)
    }

    /// Milliseconds from `now` until the due time (0 when due at once).
    #[must_use]
    pub fn delay_from(&self, now: DateTime<Utc>) -> u64 {
        u64::try_from((self.at(now) - now).num_milliseconds()).unwrap_or(0)
    }
}

/// How far back (days) an `at` is still sent to the store: see [`first_due`].
const SKEW_DAYS: i64 = 1;

/// When the first step, whose `wait` is `wait_ms`, is due for a start asked
/// for `start_at`, judged at `now` (the store's clock; see
/// [`StartOptions::check`]): `at` plus the wait, or now plus the delay and
/// the wait, or now plus the wait, never before the store's now. An `at`
/// whose sum is past at `now` by more than a day is due at once
/// (`not_before` is dropped, so no such time is sent to the store); one past
/// by less is kept, and the store, on its own clock, makes it due at once or
/// at that time (the caller's clock may be behind the store's).
#[must_use]
pub fn first_due(start_at: Option<StartAt>, wait_ms: u64, now: DateTime<Utc>) -> FirstDue {
    match start_at {
        None => FirstDue {
            not_before: None,
            delay_ms: wait_ms,
        },
        Some(StartAt::After(delay)) => FirstDue {
            not_before: None,
            delay_ms: u64::try_from(delay.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(wait_ms),
        },
        Some(StartAt::At(at)) => {
            let asked = FirstDue {
                not_before: Some(at),
                delay_ms: wait_ms,
            };
            // Judged on the caller's clock, which may run apart from the
            // store's (Postgres computes the due time on its own, never
            // before its now): an `at` is kept unless its sum is past by more
            // than a day, so a clock skew under that never starts a run
            // early. Only a time that far back (as far as
            // `DateTime::MIN_UTC`, which Postgres cannot hold) becomes "now".
            let delay = chrono::Duration::milliseconds(i64::try_from(wait_ms).unwrap_or(i64::MAX));
            let sum = at
                .checked_add_signed(delay)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            if sum > now - chrono::Duration::days(SKEW_DAYS) {
                asked
            } else {
                FirstDue {
                    not_before: None,
                    delay_ms: 0,
                }
            }
        }
    }
}

/// What a start writes: the first row, the run's step list and plan, its
/// overrides, and when the first row is due. Both stores write this and
/// nothing else (with the run's input, key and a `started` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartPlan {
    /// The first step's first attempt, placed for the run (its `delay_ms` is
    /// the step's `wait`; [`StartPlan::due`] says when it is due).
    pub first: NewStep,
    /// When the first row is due.
    pub due: FirstDue,
    /// The live step names the run records (`runs.step_names`).
    pub step_names: Vec<String>,
    /// The step plan the run records (`runs.step_plan`), placed for the run.
    pub step_plan: Vec<PlannedStep>,
    /// The run's queue and priority, kept on the run.
    pub overrides: RunOverrides,
    /// The run's deadline (`runs.deadline_at`), if it has one (see
    /// [`run_deadline`](super::run_deadline)).
    pub deadline: Option<super::RunDeadline>,
    /// What the run becomes past its deadline (`runs.on_deadline`, written
    /// only with a deadline): the workflow's `on_deadline`.
    pub on_deadline: crate::definition::DeadlineAction,
}

/// Decides a start of `definition` with `options` at `now` (the store's
/// clock), after [`StartOptions::check`].
///
/// # Errors
/// The errors of [`StartOptions::check`]; [`Error::NoSteps`] for a workflow
/// without a live step.
pub fn plan_start(
    definition: &WorkflowDefinition,
    options: &StartOptions,
    now: DateTime<Utc>,
) -> Result<StartPlan, Error> {
    options.check(now)?;
    let Some((index, entry)) = definition.first_step() else {
        return Err(Error::NoSteps {
            workflow: definition.name.to_owned(),
        });
    };
    let overrides = RunOverrides::of(options);
    let first = first_attempt_for(definition, index, entry, &overrides);
    Ok(StartPlan {
        due: first_due(options.start_at(), first.delay_ms, now),
        step_names: live_step_names(definition),
        step_plan: run_step_plan(definition, &overrides),
        first,
        overrides,
        deadline: super::run_deadline(definition, options),
        on_deadline: definition.flow.on_deadline,
    })
}

/// Which run a start of a bulk call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkSlot {
    /// A run of its own (created, or the run an earlier call created with
    /// its key).
    Own,
    /// The run of the earlier start at this index in the same call, which
    /// has the same key: as a second single start with that key, it starts
    /// nothing and returns that run, `created: false`.
    SameAs(usize),
}

/// The slot of each start of a bulk call, given their keys in call order:
/// the first start with a key takes it, each later one with the same key
/// shares its run. Starts without a key each get their own.
#[must_use]
pub fn bulk_slots<'k>(keys: impl IntoIterator<Item = Option<&'k str>>) -> Vec<BulkSlot> {
    let mut first: HashMap<&str, usize> = HashMap::new();
    keys.into_iter()
        .enumerate()
        .map(|(index, key)| match key {
            None => BulkSlot::Own,
            Some(key) => match first.get(key) {
                Some(&earlier) => BulkSlot::SameAs(earlier),
                None => {
                    first.insert(key, index);
                    BulkSlot::Own
                }
            },
        })
        .collect()
}

/// The count rule of a bulk start: at most
/// [`MAX_STARTS_PER_CALL`](crate::MAX_STARTS_PER_CALL) runs.
///
/// # Errors
/// [`Error::TooManyStarts`].
pub fn check_bulk_count(runs: usize) -> Result<(), Error> {
    check_bulk(runs, None)
}

/// The rule of a bulk start: at most
/// [`MAX_STARTS_PER_CALL`](crate::MAX_STARTS_PER_CALL) runs and
/// [`MAX_START_MANY_INPUT_BYTES`](crate::MAX_START_MANY_INPUT_BYTES) of input
/// JSON in all (`input_bytes`, when counted).
///
/// # Errors
/// [`Error::TooManyStarts`].
pub fn check_bulk(runs: usize, input_bytes: Option<usize>) -> Result<(), Error> {
    let max_runs = crate::start_options::MAX_STARTS_PER_CALL;
    let max_bytes = crate::start_options::MAX_START_MANY_INPUT_BYTES;
    if runs > max_runs || input_bytes.is_some_and(|bytes| bytes > max_bytes) {
        return Err(Error::TooManyStarts {
            runs,
            input_bytes,
            max_runs,
            max_bytes,
        });
    }
    Ok(())
}

/// What a bulk start does for one of its runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkStart {
    /// Starts it (or, when a run already holds its key, returns that one).
    Own(Box<StartPlan>),
    /// Shares the run of the earlier start at this index (same key).
    SameAs(usize),
}

/// Decides a bulk start of `definition`: checks the call's bounds, then each
/// start's options and input (against `limits`) in call order, then the
/// input bytes of the whole call; then the slots ([`bulk_slots`]) and each
/// own start's plan ([`plan_start`]). All or nothing: any refusal starts
/// none.
///
/// # Errors
/// [`Error::TooManyStarts`] over the bounds; [`Error::StartRefused`] with the
/// index of the first start refused and why (its options, its input);
/// [`Error::NoSteps`].
pub fn plan_bulk(
    definition: &WorkflowDefinition,
    runs: &[crate::start_options::NewRun],
    limits: &crate::context::Limits,
    now: DateTime<Utc>,
) -> Result<Vec<BulkStart>, Error> {
    check_bulk_count(runs.len())?;
    let mut bytes = 0usize;
    for (index, run) in runs.iter().enumerate() {
        let refused = |source: Error| Error::StartRefused {
            index,
            source: Box::new(source),
        };
        run.options.check(now).map_err(refused)?;
        limits.check_input(&run.input).map_err(refused)?;
        bytes = bytes.saturating_add(crate::start_options::json_bytes(&run.input));
    }
    check_bulk(runs.len(), Some(bytes))?;
    let slots = bulk_slots(runs.iter().map(|run| run.options.idempotency_key()));
    slots
        .into_iter()
        .zip(runs)
        .map(|(slot, run)| match slot {
            BulkSlot::Own => Ok(BulkStart::Own(Box::new(plan_start(
                definition,
                &run.options,
                now,
            )?))),
            BulkSlot::SameAs(index) => Ok(BulkStart::SameAs(index)),
        })
        .collect()
}

#[cfg(test)]
mod tests;
