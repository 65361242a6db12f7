//! The store contract: what the engine needs of a place that keeps runs,
//! and the one step loop that drives any store.
//!
//! The engine (`crate::engine`) decides every transition; a [`Store`] only
//! reads, locks, fences and writes what a plan says, each transition atomic
//! (one transaction under the run's lock in Postgres, one critical section in
//! memory). Two stores implement it: the Postgres store a
//! [`Database`](crate::Database) opens ([`Database::store`](crate::Database::store)),
//! and the testkit's memory store. The testkit's conformance suite runs the same
//! scenarios against both through this trait; a third store passes that suite
//! or is not one.
//!
//! [`Runner`] is the step loop over a store: claim, run the attempt, record its
//! outcome (retrying while the store is away), follow a handoff. The worker
//! and the testkit's `TestEnv` are each a runner and what they add around it
//! (a claim loop, heartbeats and notifications; a virtual clock and injected
//! faults).

mod claim;
mod registry;
mod runner;
mod schedules;
mod sweep;

use std::future::Future;

use serde_json::Value;

use crate::context::{RunId, SignalId};
use crate::definition::{DeadlineAction, WorkflowDefinition};
use crate::engine::{Action, AttemptResult, Plan, RunStatus, SignalCheck};
use crate::error::Error;
use crate::schedule::{DueSchedule, Fired, ScheduleChange, ScheduleSpec, ScheduleView};
use crate::start_options::StartOptions;
use crate::view::{
    LimitsNow, Overview, ResultView, RunCount, RunFilter, RunRead, RunSummary, RunView,
};

pub use crate::pg::store::PgStore;
pub use crate::start_options::NewRun;
pub use claim::{Claim, Claimer, Handoff, Stalled};
pub use registry::{Registered, Registration, registered_plan};
pub(crate) use runner::log_unregistered;
pub use runner::{Attempted, FaultHook, Observe, Runner};
pub use schedules::{FireReport, FireSettings, fire_schedules};
pub use sweep::{Repair, Repaired, SweepSettings, repair_message, sweep};

/// What ending an attempt did.
#[derive(Debug)]
pub enum Ended {
    /// The plan was applied.
    Applied(Box<Plan>),
    /// The plan was applied, and its next step, due at once, was claimed for
    /// the same worker in the same transition (see [`Handoff`]).
    Continued(Box<Plan>, Box<Claim>),
    /// The attempt parked its row (for a signal or its batch).
    Parked(Parked),
    /// The attempt had lost its fence (stalled, cancelled or claimed again):
    /// nothing changed but a `late_completion_ignored` event.
    Late,
}

/// How a parked attempt left its row and run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    /// Whether what it waits for had come already, so the row is due at once
    /// (`scheduled`) instead of `waiting`.
    pub woken: bool,
    /// The run's status after the park.
    pub run_status: RunStatus,
}

/// A place that keeps runs, steps, events, signals and batches, and applies the
/// engine's plans to them. Every method is one atomic transition or one
/// consistent read; each future is `Send` so a runner's tasks can hold it.
///
/// Errors: [`Error::Database`] and the connection errors for a store that is
/// away (the runner retries an outcome on those, see
/// [`Error::is_transient`]); the typed errors each verb documents otherwise.
pub trait Store: Send + Sync + 'static {
    /// Starts a run of `definition` with `input` (checked against the store's
    /// limits) as `options` say (checked by [`StartOptions::check`] on the
    /// store's clock, planned by [`engine::plan_start`](crate::engine::plan_start)),
    /// unless its key names a run of the same workflow already, which is
    /// returned instead: `(run, created)`. The run keeps its queue and
    /// priority (`runs.queue_override`, `runs.priority_override`) for the
    /// rows the engine plans later.
    fn start_run(
        &self,
        definition: &'static WorkflowDefinition,
        input: &Value,
        options: &StartOptions,
    ) -> impl Future<Output = Result<(RunId, bool), Error>> + Send;

    /// Starts many runs of `definition` at once, all or none (planned by
    /// [`engine::plan_bulk`](crate::engine::plan_bulk)): `(run, created)`
    /// for each, in the order given. A start whose key an earlier start of
    /// the call took gets that run, `created: false`; one whose key a run
    /// holds already gets that run, `created: false`; concurrent calls with
    /// common keys start each key once. Postgres does it in a constant
    /// number of round trips (one statement for the rows, one more to read
    /// back the runs of keys taken before, in one transaction), whatever the
    /// count. Errors: [`Error::TooManyStarts`], [`Error::StartRefused`] (with
    /// the index), and those of [`Store::start_run`].
    fn start_many(
        &self,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> impl Future<Output = Result<Vec<(RunId, bool)>, Error>> + Send;

    /// Claims up to `limit` due steps for `claimer`: the lowest priority
    /// number first, then the earliest due, then the oldest row; only rows
    /// whose run is `ready`, on `claimer`'s queues, whose step `claimer`'s own
    /// definition of the workflow holds (others are passed over, never
    /// blocking the rows behind them). Each claimed row is `in_progress`
    /// under `claimer.worker_id` with a `step_started` event (after a
    /// `definition_changed` one when the run's digest differs from the
    /// claimer's, see [`Claimer::registered`]) and a stall horizon (its
    /// timeout, else the claimer's threshold).
    fn claim(
        &self,
        claimer: &Claimer<'_>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Claim>, Error>> + Send;

    /// Ends `claim`'s attempt with `result`: fenced on the claim (same attempt,
    /// same worker, still in progress), the plan decided by the engine under the
    /// run's lock and applied. A park (`result.park`) keeps the row waiting.
    /// `retrying`: an earlier try may have committed with its reply lost; a
    /// failed fence is then that try's own change, not a late completion.
    /// `handoff`: see [`Handoff`].
    fn end_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        retrying: bool,
        handoff: Option<Handoff<'_>>,
    ) -> impl Future<Output = Result<Ended, Error>> + Send;

    /// Up to `limit` attempts the sweep should repair: in progress past their
    /// stall horizon (`timeout`), or held by a worker silent for longer than
    /// `lost_ms` or gone (`worker_lost`).
    fn stalled(
        &self,
        lost_ms: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Stalled>, Error>> + Send;

    /// Ends a stalled attempt for the sweep: fenced on the row's own claim,
    /// with a `stall_detected` event before the plan's (see
    /// [`engine::stall_event`](crate::engine::stall_event)); an attempt that
    /// ended meanwhile is left alone ([`Ended::Late`], no event).
    fn sweep_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        stalled: &Stalled,
        result: &AttemptResult,
    ) -> impl Future<Output = Result<Ended, Error>> + Send;

    /// Records a worker in the registry, before its first claim: its row
    /// (id, name, host, pid, queues, concurrency, a heartbeat now) and the
    /// definitions it runs, each stored once per digest, and once per options
    /// digest with the step plan a start of that build records (what the SQL
    /// entry point `start_run` starts with), each link with the
    /// per-deployment overrides in force
    /// ([`WorkflowDefinition::overrides_in_force`]). Idempotent: a second
    /// registration of the same id replaces the first's row and links (what
    /// a worker does when the sweep removed its row). Postgres keeps it in
    /// `workers`, `definitions`, `definition_starts` and
    /// `worker_definitions`; the memory store in
    /// a map, a worker it was told died (the testkit's
    /// `MemoryStore::worker_died`) not counting as live once the lost-worker
    /// threshold passed.
    fn register_worker(
        &self,
        registration: &Registration<'_>,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Up to `limit` rows the sweep's grace rule pauses, oldest due first:
    /// due (`scheduled`, or `waiting` past its wait timeout) for longer than
    /// `grace_ms`, their run `ready`, of a workflow that some live worker
    /// registered (heartbeat within `lost_ms`) while no live worker's
    /// definition of it holds the row's step. Rows of a workflow no live
    /// worker registered are not among them: they wait. Each comes as a
    /// claim without input or outputs.
    fn undefined_steps(
        &self,
        grace_ms: i64,
        lost_ms: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Claim>, Error>> + Send;

    /// Ends a row [`Store::undefined_steps`] found with `result` (see
    /// [`engine::undefined_result`](crate::engine::undefined_result)): fenced
    /// on the row being unclaimed and due, its run `ready`, and the rule still
    /// holding (a worker with the step may have registered since); applied as
    /// the sweep (actor `sweep`). A row the fence no longer finds is left
    /// alone: [`Ended::Late`], and nothing written.
    fn pause_undefined(
        &self,
        step: &Claim,
        result: &AttemptResult,
        grace_ms: i64,
        lost_ms: i64,
    ) -> impl Future<Output = Result<Ended, Error>> + Send;

    /// Resolves up to `limit` open batches whose children all ended but whose
    /// parent was never woken; how many.
    fn resolve_batches(&self, limit: i64) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Deletes up to `limit` finished or cancelled runs last changed more
    /// than `retention_ms` ago, with their rows; how many.
    fn delete_expired_runs(
        &self,
        retention_ms: i64,
        limit: i64,
    ) -> impl Future<Output = Result<u64, Error>> + Send;

    /// Acts on up to `limit` runs past their deadline (`runs.deadline_at` at
    /// or before the store's now), oldest deadline first, each in an atomic
    /// transition of its own under the run's lock, as
    /// [`engine::plan_deadline`](crate::engine::plan_deadline) decides there:
    /// a run not ended (`ready`, `performing` or `paused`) gets a
    /// `deadline_exceeded` event (details `{"deadline_at"}`), then the
    /// operator's cancel or pause its `on_deadline` names, recorded as actor
    /// `deadline` (a run already paused whose deadline pauses: the event
    /// alone); then its deadline is spent (`deadline_at` cleared), so a run
    /// it paused goes on when resumed. A cancel cascades to the run's fan-out
    /// children and takes the claim of a step in progress, so the worker's
    /// next heartbeat tells the body through
    /// [`StepCx::cancelled`](crate::StepCx::cancelled), as an operator's
    /// cancel does. A run that ended or whose deadline was spent meanwhile
    /// is left alone. Returns each run acted on with the action taken.
    /// Postgres reads the runs through the partial index `runs_deadline`.
    fn expire_deadlines(
        &self,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<(RunId, DeadlineAction)>, Error>> + Send;

    /// Sends signal `name` with `payload` to `run_id`, waking a step waiting
    /// for it. With [`SignalCheck::Waited`], under the run's lock, the store
    /// reads the names the run's workflow waits for (its own step plan,
    /// every definition of it registered, live worker or not, and its parked
    /// steps; nothing when the run has no step plan and no definition is
    /// registered) and lets [`check_signal_target`](crate::engine::check_signal_target)
    /// decide; [`SignalCheck::Unchecked`] stores any name. Checked in this
    /// order, nothing stored on a refusal: [`Error::InvalidSignal`],
    /// [`Error::RunNotFound`], [`Error::RunEnded`], [`Error::UnknownSignal`].
    fn signal(
        &self,
        run_id: RunId,
        name: &str,
        payload: &Value,
        check: SignalCheck,
    ) -> impl Future<Output = Result<SignalId, Error>> + Send;

    /// An operator's pause, resume, cancel or skip of `run_id`, recorded with
    /// `actor` and `reason`; the run's status after. Errors:
    /// [`Error::RunNotFound`], [`Error::IllegalMove`](crate::Error).
    fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> impl Future<Output = Result<RunStatus, Error>> + Send;

    /// A run as `read` bounds it. Errors: [`Error::RunNotFound`].
    fn run(
        &self,
        run_id: RunId,
        read: RunRead,
    ) -> impl Future<Output = Result<RunView, Error>> + Send;

    /// A run as a wait for its result reads it (see [`ResultView`]): one
    /// consistent read of its row, its latest attempt when it finished, and
    /// the reason of the event that cancelled or paused it.
    /// [`engine::settle_result`](crate::engine::settle_result) decides from
    /// it. Errors: [`Error::RunNotFound`].
    fn run_result(&self, run_id: RunId) -> impl Future<Output = Result<ResultView, Error>> + Send;

    /// Runs matching `filter`, newest first, at most its limit.
    fn list_runs(
        &self,
        filter: &RunFilter,
    ) -> impl Future<Output = Result<Vec<RunSummary>, Error>> + Send;

    /// The workflow names of the store's runs and registered definitions,
    /// sorted bytewise, at most [`Client::WORKFLOWS_MAX`](crate::Client::WORKFLOWS_MAX).
    fn workflows(&self) -> impl Future<Output = Result<Vec<String>, Error>> + Send;

    /// How many runs `filter` keeps, counted up to `cap`, as
    /// [`Client::count_runs`](crate::Client::count_runs) says. Errors:
    /// [`Error::InvalidInputPath`].
    fn count_runs(
        &self,
        filter: &RunFilter,
        cap: u32,
    ) -> impl Future<Output = Result<RunCount, Error>> + Send;

    /// Runs and queues now and the last hour on the store's clock, as
    /// [`Client::overview`](crate::Client::overview) reads them.
    fn overview(&self) -> impl Future<Output = Result<Overview, Error>> + Send;

    /// The flow limits in force and what each holds now on the store's
    /// clock, as [`Client::limits`](crate::Client::limits) reads them.
    fn limits(&self) -> impl Future<Output = Result<LimitsNow, Error>> + Send;

    /// When the newest run was created, if any.
    fn newest_activity(
        &self,
    ) -> impl Future<Output = Result<Option<chrono::DateTime<chrono::Utc>>, Error>> + Send;

    /// Writes the schedules a worker declares in code, each under its row's
    /// lock as [`engine::declare_schedule`](crate::engine::declare_schedule)
    /// decides (a new row from the first tick after now; the code's values on
    /// a row declared in code, its pause kept; a row the client created left
    /// alone). Returns the names left alone.
    fn declare_schedules(
        &self,
        specs: &[ScheduleSpec],
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send;

    /// Creates a schedule (origin `client`), its first tick the first after
    /// now. Errors: [`Error::ScheduleExists`].
    fn create_schedule(
        &self,
        spec: &ScheduleSpec,
    ) -> impl Future<Output = Result<ScheduleView, Error>> + Send;

    /// Changes schedule `name` under its lock as
    /// [`engine::change_schedule`](crate::engine::change_schedule) decides;
    /// the row after. Errors: [`Error::ScheduleNotFound`] and the engine's.
    fn change_schedule(
        &self,
        name: &str,
        change: &ScheduleChange,
    ) -> impl Future<Output = Result<ScheduleView, Error>> + Send;

    /// Deletes schedule `name` (its runs stay); the row deleted. Errors:
    /// [`Error::ScheduleNotFound`].
    fn delete_schedule(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ScheduleView, Error>> + Send;

    /// Schedules by name, at most `limit`: those of `workflow`, the one named
    /// `name`, or all. Without `name`, a listing: each row without its input
    /// ([`ScheduleView::listed`](crate::schedule::ScheduleView::listed)).
    fn list_schedules(
        &self,
        workflow: Option<&str>,
        name: Option<&str>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<ScheduleView>, Error>> + Send;

    /// Up to `limit` unpaused schedules of `workflows` whose next tick has
    /// come, oldest tick first, each with the store's time; no locks.
    fn due_schedules(
        &self,
        workflows: &[String],
        limit: i64,
    ) -> impl Future<Output = Result<Vec<DueSchedule>, Error>> + Send;

    /// Fires a schedule [`Store::due_schedules`] found, in one atomic
    /// transition: fenced on the row being unpaused and still at the tick
    /// read (a row another worker holds is passed over: [`Fired::Lost`]);
    /// [`engine::fire_plan`](crate::engine::fire_plan) decides the ticks at
    /// the store's time; each tick's run is started with `definition` and the
    /// key [`Tick::idempotency_key`](crate::schedule::Tick::idempotency_key)
    /// (a run the key holds is returned, not started again) and records its
    /// tick; the row moves on ([`engine::fired`](crate::engine::fired)). A
    /// row this version cannot read is paused
    /// ([`engine::pause_unreadable`](crate::engine::pause_unreadable)):
    /// [`Fired::Unreadable`].
    fn fire_schedule(
        &self,
        definition: &'static WorkflowDefinition,
        due: &DueSchedule,
        max_ticks: usize,
    ) -> impl Future<Output = Result<Fired, Error>> + Send;
}
