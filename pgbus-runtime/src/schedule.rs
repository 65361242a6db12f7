//! Schedules: start a run of a workflow on every tick of a cron expression in a
//! time zone (as DBOS's scheduled workflows, Temporal's Schedules, Oban's cron
//! plugin and River's periodic jobs do).
//!
//! A schedule is declared in code (`#[workflow(schedule = "0 */5 * * * *")]`,
//! or [`WorkerBuilder::schedule`](crate::WorkerBuilder::schedule)) or managed
//! at run time ([`Client::create_schedule`](crate::Client::create_schedule)
//! and the `pgbus schedules` command). Either way it is one row of
//! `<schema>.schedules`, named, and fired by whichever worker that registered
//! its workflow finds a tick due first: each tick starts exactly one run,
//! keyed by (schedule, tick time), however many workers race for it (see
//! [`fire_schedules`](crate::store::fire_schedules)).
//!
//! A scheduled run reads its tick from [`StepCx::tick`](crate::StepCx::tick).
//! The expression grammar, the time zones and the rule in a daylight-saving
//! gap or overlap are [`pgbus_core::schedule`]'s.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{Limits, RunId};
use crate::error::Error;
pub use pgbus_core::schedule::{
    CatchUp, Cron, DEFAULT_CATCH_UP_LIMIT, DEFAULT_ZONE, MAX_CATCH_UP_LIMIT,
    MAX_SCHEDULE_NAME_CHARS, NEVER_FIRES_HORIZON_YEARS, ScheduleError, check_schedule_name,
};

/// How late the oldest unfired tick of a schedule may be found before its
/// ticks count as missed and the schedule's [`CatchUp`] policy decides what
/// runs (Quartz's misfire threshold, and its default): 60 seconds. A worker
/// fires due ticks every second (see
/// [`WorkerBuilder::schedule_interval`](crate::WorkerBuilder::schedule_interval)),
/// so ticks are missed only while no worker that registered the workflow ran.
pub const MISSED_TICK_THRESHOLD_MS: i64 = 60_000;

/// How many ticks of one schedule one fire pass starts at most; the rest wait
/// for the next pass (a worker's next second).
pub const MAX_TICKS_PER_PASS: usize = 100;

/// How many due schedules one fire pass of a worker looks at.
pub const MAX_SCHEDULES_PER_PASS: i64 = 100;

/// The most schedules one listing returns.
pub const MAX_SCHEDULES_LISTED: i64 = 1_000;

/// A schedule as a caller writes it: a cron expression (see
/// [`pgbus_core::schedule`]), its time zone (default `UTC`) and what to do
/// about ticks missed while no worker ran (default [`CatchUp::One`]). Checked
/// where it is used.
///
/// ```
/// use pgbus_runtime::schedule::{CatchUp, Schedule};
/// let every_morning = Schedule::cron("0 0 7 * * MON-FRI")
///     .timezone("Europe/Berlin")
///     .catch_up(CatchUp::Skip);
/// assert!(every_morning.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    expression: String,
    timezone: String,
    catch_up: CatchUp,
}

impl Schedule {
    /// A schedule firing on `expression` in UTC, catching up with one run.
    #[must_use]
    pub fn cron(expression: impl Into<String>) -> Self {
        Self {
            expression: expression.into(),
            timezone: DEFAULT_ZONE.to_owned(),
            catch_up: CatchUp::default(),
        }
    }

    /// The IANA time zone the expression reads wall-clock time in.
    #[must_use]
    pub fn timezone(mut self, zone: impl Into<String>) -> Self {
        self.timezone = zone.into();
        self
    }

    /// What to do about missed ticks.
    #[must_use]
    pub const fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// The expression as written.
    #[must_use]
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone as written.
    #[must_use]
    pub fn zone(&self) -> &str {
        &self.timezone
    }

    /// The catch-up policy.
    #[must_use]
    pub const fn catch_up_policy(&self) -> CatchUp {
        self.catch_up
    }

    /// Checks the expression, the zone and the catch-up bound.
    ///
    /// # Errors
    /// [`ScheduleError`] naming the field.
    pub fn check(&self) -> Result<Cron, ScheduleError> {
        check_catch_up(self.catch_up)?;
        Cron::parse(&self.expression, &self.timezone)
    }
}

/// A `CatchUp::All` bound out of range, as the parser would refuse it.
fn check_catch_up(catch_up: CatchUp) -> Result<(), ScheduleError> {
    match catch_up {
        CatchUp::All(limit) if !(1..=MAX_CATCH_UP_LIMIT).contains(&limit) => {
            format!("all({limit})").parse::<CatchUp>().map(|_| ())
        }
        _ => Ok(()),
    }
}

/// A schedule checked and ready to store: what
/// [`Store::create_schedule`](crate::store::Store::create_schedule) and
/// [`Store::declare_schedules`](crate::store::Store::declare_schedules) take.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    /// The schedule's name (its key).
    pub name: String,
    /// The workflow each tick starts a run of.
    pub workflow: String,
    /// The expression and zone, checked.
    pub cron: Cron,
    /// What to do about missed ticks.
    pub catch_up: CatchUp,
    /// The input of every run it starts.
    pub input: Value,
}

impl ScheduleSpec {
    /// Checks `name`, `schedule`, `workflow` (see
    /// [`MAX_SCHEDULE_WORKFLOW_CHARS`]) and `input` (against `limits`).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] naming the field (`name`, `schedule`,
    /// `timezone`, `catch_up`, `workflow` or `input`); its `name` is cut to
    /// [`MAX_QUOTED_CHARS`](pgbus_core::schedule::MAX_QUOTED_CHARS).
    pub fn new(
        name: &str,
        workflow: &str,
        schedule: &Schedule,
        input: Value,
        limits: &Limits,
    ) -> Result<Self, Error> {
        // The name as the error quotes it: a refused one may be megabytes.
        let quoted = pgbus_core::schedule::quoted(name);
        let invalid = |error: &ScheduleError| Error::InvalidSchedule {
            name: quoted.clone(),
            field: error.field(),
            reason: error.to_string(),
        };
        check_schedule_name(name).map_err(|e| invalid(&e))?;
        let cron = schedule.check().map_err(|e| invalid(&e))?;
        check_workflow(workflow).map_err(|reason| Error::InvalidSchedule {
            name: quoted.clone(),
            field: "workflow",
            reason: format!("`workflow`: {reason}"),
        })?;
        limits
            .check_input(&input)
            .map_err(|error| Error::InvalidSchedule {
                name: quoted.clone(),
                field: "input",
                reason: format!("`input`: {error}"),
            })?;
        Ok(Self {
            name: name.to_owned(),
            workflow: workflow.to_owned(),
            cron,
            catch_up: schedule.catch_up,
            input,
        })
    }
}

/// The longest workflow name a schedule takes, in characters.
pub const MAX_SCHEDULE_WORKFLOW_CHARS: usize = 255;

/// Checks the workflow a schedule starts, named at run time by
/// [`Client::create_schedule_of`](crate::Client::create_schedule_of) and
/// `pgbus schedules create --workflow`: 1 to [`MAX_SCHEDULE_WORKFLOW_CHARS`]
/// characters, none of them control or invisible ones. No worker registers a
/// workflow named otherwise, so such a schedule would never fire, and its row
/// would be listed by every `pgbus schedules list` and dashboard page.
fn check_workflow(workflow: &str) -> Result<(), String> {
    if workflow.trim().is_empty() {
        return Err("a workflow name cannot be empty or only whitespace".to_owned());
    }
    if workflow.chars().count() > MAX_SCHEDULE_WORKFLOW_CHARS {
        return Err(format!(
            "a workflow name is at most {MAX_SCHEDULE_WORKFLOW_CHARS} characters"
        ));
    }
    if workflow
        .chars()
        .any(|c| c.is_control() || pgbus_core::is_invisible(c))
    {
        return Err("a workflow name cannot hold control or invisible characters".to_owned());
    }
    Ok(())
}

/// A schedule declared in code with `#[workflow(schedule = "...")]`: the
/// macro's checked options, and how to build the input of its runs (the input
/// type's `Default`). Named after the workflow.
#[derive(Debug, Clone, Copy)]
pub struct DeclaredSchedule {
    /// The cron expression.
    pub expression: &'static str,
    /// The IANA zone (`timezone = "..."`, default `UTC`).
    pub timezone: &'static str,
    /// `catch_up = "..."` (default `one`).
    pub catch_up: CatchUp,
    /// The input of every run: `Default::default()` of the workflow's input
    /// type, as JSON.
    pub input: fn() -> Result<Value, serde_json::Error>,
}

impl DeclaredSchedule {
    /// As a [`Schedule`].
    #[must_use]
    pub fn schedule(&self) -> Schedule {
        Schedule::cron(self.expression)
            .timezone(self.timezone)
            .catch_up(self.catch_up)
    }
}

/// The schedules of `workflows` declared in code, each named after its
/// workflow with its declared input, checked, by name.
///
/// # Errors
/// [`Error::InvalidSchedule`] for an input that does not serialize or is over
/// `limits`, or values that do not check.
pub(crate) fn declared_specs(
    workflows: impl Iterator<
        Item = (
            &'static crate::definition::WorkflowDefinition,
            Option<&'static DeclaredSchedule>,
        ),
    >,
    limits: &Limits,
) -> Result<Vec<ScheduleSpec>, Error> {
    let mut declared: Vec<_> = workflows
        .filter_map(|(definition, schedule)| Some((definition, schedule?)))
        .collect();
    declared.sort_by_key(|(definition, _)| definition.name);
    declared
        .into_iter()
        .map(|(definition, schedule)| {
            let input = (schedule.input)().map_err(|error| Error::InvalidSchedule {
                name: definition.name.to_owned(),
                field: "input",
                reason: format!("`input`: the input type's default does not serialize: {error}"),
            })?;
            ScheduleSpec::new(
                definition.name,
                definition.name,
                &schedule.schedule(),
                input,
                limits,
            )
        })
        .collect()
}

/// Where a schedule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleOrigin {
    /// Declared in code and written by every worker that registers it; an
    /// update through the client is refused (change the code), a pause
    /// survives redeploys.
    Code,
    /// Created through the client or `pgbus schedules create`.
    Client,
}

impl ScheduleOrigin {
    /// The stored word: `code` or `client`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Client => "client",
        }
    }
}

impl fmt::Display for ScheduleOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScheduleOrigin {
    type Err = crate::engine::UnknownStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "code" => Ok(Self::Code),
            "client" => Ok(Self::Client),
            other => Err(crate::engine::UnknownStatus(other.to_owned())),
        }
    }
}

/// A schedule as stored: a `schedules` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// The workflow each tick starts.
    pub workflow: String,
    /// The cron expression.
    pub expression: String,
    /// The IANA zone.
    pub timezone: String,
    /// The catch-up policy's stored form (`skip`, `one`, `all(N)`).
    pub catch_up: String,
    /// The input of every run it starts; `null` in a listing
    /// ([`Self::input_omitted`]).
    pub input: Value,
    /// `true` when read in a listing (every schedule, or a workflow's): an
    /// input may hold up to the input limit (1 MiB), so a listing of up to
    /// [`MAX_SCHEDULES_LISTED`] rows leaves inputs out and stays small; the
    /// read of one schedule by name ([`Client::schedule`](crate::Client::schedule),
    /// `pgbus schedules show`) carries it.
    #[serde(default)]
    pub input_omitted: bool,
    /// Declared in code, or created through the client.
    pub origin: ScheduleOrigin,
    /// The next tick to fire; `None` when no tick is ahead.
    pub next_tick_at: Option<DateTime<Utc>>,
    /// The last tick a run was started for.
    pub last_tick_at: Option<DateTime<Utc>>,
    /// The run started for it (it may since have been deleted by retention).
    pub last_run_id: Option<RunId>,
    /// When a worker last fired it, on the store's clock.
    pub last_fired_at: Option<DateTime<Utc>>,
    /// When it was paused, if it is.
    pub paused_at: Option<DateTime<Utc>>,
    /// Who paused it (an actor, or `pgbus` for a row this version cannot fire).
    pub paused_by: Option<String>,
    /// Why.
    pub paused_reason: Option<String>,
    /// Missed ticks the catch-up policy started no run for, in all.
    pub ticks_skipped: i64,
    /// When a worker last declared it in code (`None` for the client's).
    pub declared_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl ScheduleView {
    /// A new row for `spec`, created `now` with its first tick after `now`.
    #[must_use]
    pub fn new(spec: &ScheduleSpec, origin: ScheduleOrigin, now: DateTime<Utc>) -> Self {
        Self {
            name: spec.name.clone(),
            workflow: spec.workflow.clone(),
            expression: spec.cron.expression().to_owned(),
            timezone: spec.cron.zone().to_owned(),
            catch_up: spec.catch_up.to_string(),
            input: spec.input.clone(),
            input_omitted: false,
            origin,
            next_tick_at: spec.cron.next_after(now),
            last_tick_at: None,
            last_run_id: None,
            last_fired_at: None,
            paused_at: None,
            paused_by: None,
            paused_reason: None,
            ticks_skipped: 0,
            declared_at: (origin == ScheduleOrigin::Code).then_some(now),
            created_at: now,
            updated_at: now,
        }
    }

    /// Whether it is paused.
    #[must_use]
    pub const fn is_paused(&self) -> bool {
        self.paused_at.is_some()
    }

    /// This row as a listing shows it: without its input (see
    /// [`Self::input_omitted`]). What both stores return for a listing.
    #[must_use]
    pub fn listed(mut self) -> Self {
        self.input = Value::Null;
        self.input_omitted = true;
        self
    }
}

/// A change to a stored schedule (see
/// [`engine::change_schedule`](crate::engine::change_schedule)).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleChange {
    /// New values for the fields given; the next tick is computed again from
    /// now. Refused for a schedule declared in code.
    Update(ScheduleUpdate),
    /// No tick fires until [`ScheduleChange::Resume`]; recorded with the actor
    /// and reason.
    Pause {
        /// Who.
        actor: String,
        /// Why.
        reason: String,
    },
    /// Fires again from the first tick after now: ticks that fell while it was
    /// paused are not caught up.
    Resume,
}

/// The fields of a [`ScheduleChange::Update`]; `None` keeps a field.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ScheduleUpdate {
    /// A new cron expression.
    pub expression: Option<String>,
    /// A new zone.
    pub timezone: Option<String>,
    /// A new catch-up policy.
    pub catch_up: Option<CatchUp>,
    /// A new input for the runs it starts.
    pub input: Option<Value>,
}

impl ScheduleUpdate {
    /// Changes nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A new expression.
    #[must_use]
    pub fn expression(mut self, expression: impl Into<String>) -> Self {
        self.expression = Some(expression.into());
        self
    }

    /// A new zone.
    #[must_use]
    pub fn timezone(mut self, zone: impl Into<String>) -> Self {
        self.timezone = Some(zone.into());
        self
    }

    /// A new catch-up policy.
    #[must_use]
    pub const fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.catch_up = Some(catch_up);
        self
    }

    /// A new input.
    #[must_use]
    pub fn input(mut self, input: Value) -> Self {
        self.input = Some(input);
        self
    }
}

/// The tick a scheduled run was started for: the schedule's name and the
/// tick's time (the instant it fired at; see [`pgbus_core::schedule`] for the
/// daylight-saving rule). Stored on the run (`runs.schedule_name`,
/// `runs.tick_at`); read it with [`StepCx::tick`](crate::StepCx::tick).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tick {
    /// The schedule.
    pub schedule: String,
    /// The tick's time.
    pub at: DateTime<Utc>,
}

impl Tick {
    /// The idempotency key a tick's run is started with:
    /// `schedule:<name>:<tick as RFC 3339, UTC, whole seconds>`. A second
    /// start of the same tick (a race, a retry after a lost reply) finds the
    /// first run instead of starting another.
    #[must_use]
    pub fn idempotency_key(&self) -> String {
        format!(
            "schedule:{}:{}",
            self.schedule,
            self.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        )
    }
}

/// A due schedule as a fire pass reads it (without a lock): its row, and the
/// store's time of the read.
#[derive(Debug, Clone)]
pub struct DueSchedule {
    /// The row.
    pub schedule: ScheduleView,
    /// The store's clock when it was read.
    pub now: DateTime<Utc>,
}

/// What firing a schedule does (decided by
/// [`engine::fire_plan`](crate::engine::fire_plan)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// The tick the row must still be at (the fence): `next_tick_at` as read.
    pub expected: DateTime<Utc>,
    /// The ticks to start a run for, oldest first.
    pub ticks: Vec<DateTime<Utc>>,
    /// The schedule's next tick afterwards.
    pub next_tick_at: Option<DateTime<Utc>>,
    /// Missed ticks the catch-up policy leaves without a run.
    pub skipped: i64,
    /// Whether the oldest due tick was missed (the catch-up policy applied).
    pub missed: bool,
}

/// What a fire of one schedule did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fired {
    /// The plan was applied: the runs of its ticks, oldest first, each with
    /// whether this fire created it (`false`: a run with its key existed).
    Applied {
        /// What was decided.
        plan: FirePlan,
        /// (tick, run, created) for each of `plan.ticks`.
        runs: Vec<(DateTime<Utc>, RunId, bool)>,
    },
    /// Another worker holds or fired it, or it changed (paused, updated,
    /// deleted) since it was read, or it is not due after all: nothing was
    /// written.
    Lost,
    /// Its expression, zone or policy does not read in this version: it was
    /// paused (by `pgbus`) with this reason.
    Unreadable(String),
}
