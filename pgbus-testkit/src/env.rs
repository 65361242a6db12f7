//! The test environment: the engine and the memory store on a virtual clock.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use futures_util::FutureExt as _;
use pgbus_runtime::engine::{ErrorRecord, RunStatus, StallAction, StepOutcome, StepStatus, Verb};
use pgbus_runtime::store::{Runner, SweepSettings};
use pgbus_runtime::{
    Error, Limits, RunFilter, RunId, RunRead, RunSummary, RunView, StartOptions, Started,
    StepError, SweepReport, Workflow, WorkflowDefinition,
};
use serde_json::Value;

use crate::memory::{MemoryStore, TESTKIT_WORKER};

mod recorder;
// A run's result, on the virtual clock.
mod result;

pub use result::TestResult;

use pgbus_runtime::worker::capped_ms;
use recorder::Recorder;

// Signals and operator actions, as the client sends them.
mod actions;
// Schedules, managed and fired.
mod schedules;

pub use schedules::MAX_TICKS_PER_ADVANCE;
mod start;

struct Fault {
    workflow: String,
    step: String,
    remaining: u32,
    error: Arc<dyn Fn() -> StepError + Send + Sync>,
}

/// One step attempt the environment ran, as it ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StepRecord {
    /// The run.
    pub run_id: RunId,
    /// The workflow.
    pub workflow: String,
    /// The durable step name.
    pub step: String,
    /// The attempt number, from 1.
    pub attempt: i32,
    /// What the attempt decided.
    pub verb: Verb,
    /// The attempt's status afterwards: its final status, or `Waiting` when it
    /// parked for a signal or its batch (`Scheduled` when a signal that came
    /// meanwhile woke it at once).
    pub status: StepStatus,
    /// What followed it; `None` when it parked instead of ending.
    pub outcome: Option<StepOutcome>,
    /// The run's status afterwards.
    pub run_status: RunStatus,
    /// The error, if the attempt failed.
    pub error: Option<ErrorRecord>,
    /// The output it recorded.
    pub output: Option<Value>,
    /// The virtual time it ran at.
    pub at: DateTime<Utc>,
    /// The attempt lost its claim while it ran ([`TestEnv::lose_claim`]): its
    /// completion was ignored, and `status` and `outcome` say what it would have
    /// applied.
    pub late: bool,
}

/// Runs workflows step by step in memory, on a clock that moves only when the test
/// moves it. The same engine decides every transition as on Postgres; the
/// differential suite keeps the two stores in step.
///
/// Waits and reattempt delays are virtual. A step's `timeout` is not: it bounds the
/// body in real time, as on a worker, since a body's own awaits are real.
///
/// ```
/// use pgbus_runtime::prelude::*;
/// use pgbus_testkit::TestEnv;
///
/// struct Hello;
/// #[workflow]
/// impl Hello {
///     #[step]
///     async fn greet(&self, _cx: &mut StepCx<()>) {}
///     #[step(wait = "1h")]
///     async fn follow_up(&self, _cx: &mut StepCx<()>) {}
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let env = TestEnv::new().register(Hello);
/// let run = env.start::<Hello>(&()).unwrap().run_id;
/// env.run_until_idle().await;                 // greet
/// env.advance(std::time::Duration::from_secs(3600));
/// env.run_until_idle().await;                 // follow_up, an hour later
/// assert_eq!(env.run(run).unwrap().run.status, pgbus_runtime::RunStatus::Finished);
/// # });
/// ```
pub struct TestEnv {
    /// The step loop over the memory store, with the registered workflows.
    runner: Runner<MemoryStore>,
    faults: Arc<Mutex<Vec<Fault>>>,
    stall_action: StallAction,
    lost_worker_threshold: Duration,
    retention: Option<Duration>,
    undefined_step_grace: Option<Duration>,
    limits: Limits,
    /// Queues claimed from beside those of the registered workflows
    /// ([`TestEnv::queue`]).
    queues: Vec<String>,
    /// The queue concurrency limits registered with the workflows
    /// ([`TestEnv::queue_concurrency`]).
    queue_limits: Vec<(String, u32)>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("now", &self.now())
            .field("workflows", &self.runner.workflows())
            .finish_non_exhaustive()
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

/// How many attempts one `run_until_idle` or `run_to_completion` call runs at most.
pub const MAX_ATTEMPTS_PER_CALL: usize = 10_000;

/// Where the virtual clock starts: 2026-01-01T00:00:00Z.
#[must_use]
pub fn default_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

impl TestEnv {
    /// An empty environment whose clock starts at [`default_start`].
    #[must_use]
    pub fn new() -> Self {
        Self::starting_at(default_start())
    }

    /// An empty environment whose clock starts at `now`.
    #[must_use]
    pub fn starting_at(now: DateTime<Utc>) -> Self {
        let faults: Arc<Mutex<Vec<Fault>>> = Arc::new(Mutex::new(Vec::new()));
        let hook = Arc::clone(&faults);
        let runner = Runner::new(MemoryStore::starting_at(now), TESTKIT_WORKER).faults(Arc::new(
            move |workflow: &str, step: &str| take_fault(&hook, workflow, step),
        ));
        Self {
            runner,
            faults,
            stall_action: StallAction::default(),
            lost_worker_threshold: Duration::from_secs(30),
            retention: Some(pgbus_runtime::worker::DEFAULT_RETENTION),
            undefined_step_grace: Some(pgbus_runtime::worker::DEFAULT_UNDEFINED_STEP_GRACE),
            limits: Limits::default(),
            queues: Vec::new(),
            queue_limits: Vec::new(),
        }
    }

    /// The sizes of inputs and signal payloads accepted, as
    /// `DatabaseBuilder::limits` sets them for a database (default
    /// [`Limits::default`]: 1 MiB and 256 KiB of JSON).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self.runner.store().set_limits(limits);
        self.runner = self.runner.limits(limits);
        self
    }

    /// What [`TestEnv::sweep`] does with a stalled attempt, as
    /// `WorkerBuilder::stall_action` (default: pause the run).
    #[must_use]
    pub const fn stall_action(mut self, action: StallAction) -> Self {
        self.stall_action = action;
        self
    }

    /// How long a crashed worker stays silent before [`TestEnv::sweep`] takes
    /// its attempts as lost, as `WorkerBuilder::lost_worker_threshold` (default
    /// 30 s).
    #[must_use]
    pub const fn lost_worker_threshold(mut self, threshold: Duration) -> Self {
        self.lost_worker_threshold = threshold;
        self
    }

    /// How long [`TestEnv::sweep`] keeps finished and cancelled runs, as
    /// `WorkerBuilder::retention` (default 30 days; `None` keeps them).
    #[must_use]
    pub const fn retention(mut self, retention: Option<Duration>) -> Self {
        self.retention = retention;
        self
    }

    /// How long a due row whose step the registered definition lacks waits
    /// before [`TestEnv::sweep`] pauses its run with `StepNotDefined`, as
    /// `WorkerBuilder::undefined_step_grace` (default 5 minutes; `None`
    /// never). The environment's registered workflows are its live worker.
    #[must_use]
    pub const fn undefined_step_grace(mut self, grace: Option<Duration>) -> Self {
        self.undefined_step_grace = grace;
        self
    }

    /// Claims the next due step for a worker that dies at once (as if killed with
    /// SIGKILL right after its claim): the row stays `in_progress`, the run
    /// `performing`, until [`TestEnv::sweep`] finds it, after the lost-worker
    /// threshold (`worker_lost`) or the step's stall horizon (`timeout`).
    /// Returns the run whose step was claimed, if any was due.
    #[allow(clippy::must_use_candidate)] // called for its effect; the run is a convenience
    pub fn crash_next(&self) -> Option<RunId> {
        let queues = self.runner.claimed_queues();
        self.store().rows().crash_next(&self.runner.claimer(queues))
    }

    /// Sweeps once, as `Worker::sweep`: runs past their deadline are
    /// cancelled or paused (a `deadline_exceeded` event, actor `deadline`);
    /// stalled attempts end with the stall action, a `StepStalled` error and
    /// a `stall_detected` event; finished and cancelled runs older than the
    /// retention are deleted.
    pub fn sweep(&self) -> SweepReport {
        let settings = SweepSettings {
            stall_action: self.stall_action,
            lost_ms: capped_ms(self.lost_worker_threshold),
            retention_ms: self.retention.map(capped_ms),
            stalled_limit: i64::MAX,
            batch_limit: i64::MAX,
            retention_batch: i64::MAX,
            retention_batches: 1,
            undefined_grace_ms: self.undefined_step_grace.map(capped_ms),
            undefined_limit: i64::MAX,
            deadline_limit: i64::MAX,
        };
        let sweep = pgbus_runtime::store::sweep(
            self.store(),
            &settings,
            |workflow| self.runner.definition(workflow),
            |_| {},
        );
        match sweep.now_or_never() {
            Some(Ok(report)) => report,
            // The memory store neither waits nor fails.
            Some(Err(_)) | None => SweepReport::default(),
        }
    }

    /// Acts on the runs past their deadline at the current virtual time, as
    /// a worker's sweep does (see `Store::expire_deadlines`); how many.
    fn expire_deadlines(&self) -> usize {
        // The memory store refuses nothing here: the engine's moves are
        // legal from every state it acts on.
        self.store()
            .rows()
            .expire_deadlines(i64::MAX)
            .map_or(0, |expired| expired.len())
    }

    /// Registers a workflow value; as a worker, the environment runs only the
    /// steps its registered definitions hold, and its store's registry lists
    /// them as its live worker's. A second value with the same name replaces
    /// the first. Overrides given before ([`TestEnv::overrides`]) apply to it
    /// when they name it.
    ///
    /// # Panics
    /// When overrides given before name `W`'s workflow and do not fit it (a
    /// step it lacks: they were checked against another workflow value of
    /// the same name), with the refusal's message: a mistake in the test.
    #[must_use]
    #[allow(clippy::panic)] // test support: overrides that do not fit are the test's bug
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.runner = match self.runner.try_register(workflow) {
            Ok(runner) => runner,
            Err(refused) => panic!("{refused}"),
        };
        let this = self.claim_queues();
        this.announce();
        this.declare_schedules();
        this
    }

    /// Registers the environment's worker in the store's registry: the
    /// registered definitions (their limits replacing their workflows') and
    /// the queue limits, as a worker does before its first claim.
    pub(super) fn announce(&self) {
        self.store().rows().register_worker(
            TESTKIT_WORKER,
            &self.runner.definitions(),
            self.runner.claimed_queues(),
            &self.queue_limits,
        );
    }

    /// The definition of `W` the environment starts runs with (with the
    /// overrides in force, as a client of the same overrides would), or
    /// [`Error::WorkflowNotRegistered`] unless `W` is registered.
    fn registered<W: Workflow>(&self) -> Result<&'static WorkflowDefinition, Error> {
        match self.runner.definition(W::DEFINITION.name) {
            Some(_) => self.runner.overrides_in_force().apply(W::DEFINITION),
            None => Err(Error::WorkflowNotRegistered {
                workflow: W::DEFINITION.name.to_owned(),
            }),
        }
    }

    /// Starts a run of `W`, due after its first step's `wait`, as
    /// `Client::start`.
    ///
    /// # Errors
    /// [`Error::WorkflowNotRegistered`] unless [`TestEnv::register`] was
    /// given a `W` (nothing here would run it), [`Error::Json`] when the
    /// input does not serialize, [`Error::NoSteps`].
    pub fn start<W: Workflow>(&self, input: &W::Input) -> Result<Started, Error> {
        self.start_with::<W>(input, &StartOptions::new())
    }

    /// Starts a run of `W` unless one was started with `key`, as
    /// `Client::start_idempotent`.
    ///
    /// # Errors
    /// [`Error::BlankIdempotencyKey`], [`Error::InvalidIdempotencyKey`] (over
    /// 255 characters, or a control character), and the errors of
    /// [`TestEnv::start`].
    pub fn start_idempotent<W: Workflow>(
        &self,
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        self.start_with::<W>(input, &StartOptions::new().key(key))
    }

    /// The virtual time.
    #[must_use]
    pub fn now(&self) -> DateTime<Utc> {
        self.store().now()
    }

    /// Moves the virtual clock forward; steps whose time has come become due. A
    /// jump past the last time the clock can show (year 262143) stops there.
    ///
    /// The schedules of the registered workflows fire on the way, each tick at
    /// its own time, as a worker that never stopped would fire them (at most
    /// [`MAX_TICKS_PER_ADVANCE`] ticks a call): their runs are started, not
    /// run (`run_until_idle` runs them). Runs whose deadline passes on the
    /// way are cancelled or paused as a worker's sweep would (their
    /// `deadline_exceeded` event at the time of the tick before it, or at the
    /// end). [`TestEnv::outage`] moves the clock without either.
    pub fn advance(&self, by: Duration) {
        let until = schedules::later(self.now(), by);
        self.advance_firing(until);
    }

    /// Makes the next `times` attempts of `step` of `workflow` fail with
    /// `error()` instead of running the body (guards still run first), as if the
    /// body had returned that error.
    pub fn fail_step(
        &self,
        workflow: &str,
        step: &str,
        times: u32,
        error: impl Fn() -> StepError + Send + Sync + 'static,
    ) {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Fault {
                workflow: workflow.to_owned(),
                step: step.to_owned(),
                remaining: times,
                error: Arc::new(error),
            });
    }

    /// Runs the first due step (by priority, then due time), if any, and returns
    /// how it ended.
    pub async fn run_next(&self) -> Option<StepRecord> {
        let queues = self.runner.claimed_queues();
        let claim = self.runner.claim(queues, 1).await.ok()?.pop()?;
        let recorder = Recorder {
            store: self.store(),
            record: Mutex::new(None),
        };
        // No handoff: each call runs one attempt.
        let stopping = AtomicBool::new(true);
        self.runner
            .run_claim(claim, (), &recorder, 0, &stopping)
            .await;
        recorder
            .record
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs due steps until none is due at the current virtual time. Stops after
    /// 10,000 attempts, so a body that reattempts with no wait forever ends the
    /// call instead of hanging the test.
    pub async fn run_until_idle(&self) -> Vec<StepRecord> {
        let mut records = Vec::new();
        while records.len() < MAX_ATTEMPTS_PER_CALL {
            let Some(record) = self.run_next().await else {
                break;
            };
            records.push(record);
        }
        records
    }

    /// Runs every run to its end: due steps now, then the clock jumps to the next
    /// due time, and again, until nothing is scheduled. Waits of hours take no real
    /// time, and a `wait_timeout` ends when the clock reaches it; so does a
    /// run's deadline (the clock jumps to it when nothing is due before, and
    /// the run is cancelled or paused as a worker's sweep would). A step waiting
    /// for a signal with no `wait_timeout`, or for its fan_out batch, is left
    /// waiting (the call returns): only [`TestEnv::signal`] or its children
    /// ending wake it. Stops after `10_000` attempts to end a runaway loop.
    /// The sweep does not run: [`TestEnv::sweep`] does.
    ///
    /// # Errors
    /// [`Error::RunUnrunnable`] when, with nothing else left to run, a
    /// `ready` run's next step is one the environment cannot run (its
    /// workflow not registered, as for a fan_out child of an unregistered
    /// workflow, a step the registered definition lacks, as for a run
    /// started under another version, or a queue it does not claim): the clock is moved to when that step
    /// became due, and the error names the run, what is missing and what to
    /// register, as the run's [`RunView::unrunnable`] does. The earliest such
    /// step is named; the attempts run before it are in the runs' views.
    pub async fn run_to_completion(&self) -> Result<Vec<StepRecord>, Error> {
        let mut records = Vec::new();
        while records.len() < MAX_ATTEMPTS_PER_CALL {
            if let Some(record) = self.run_next().await {
                records.push(record);
                continue;
            }
            if self.expire_deadlines() > 0 {
                continue;
            }
            let mut rows = self.store().rows();
            // The earlier of the next due row and the next deadline; a row
            // due already that nothing ran is for the check below.
            let due = rows.next_due(self.runner.registered());
            let wake = match due {
                Some(due) if due <= rows.now => None,
                due => due.into_iter().chain(rows.next_deadline()).min(),
            };
            if let Some(at) = wake
                && at > rows.now
            {
                rows.now = at;
                continue;
            }
            // Nothing more the environment can run.
            let Some((due, run_id)) =
                rows.stuck(self.runner.registered(), self.runner.claimed_queues())
            else {
                break;
            };
            rows.now = rows.now.max(due);
            let read = RunRead::latest(1).lost_worker_threshold(self.lost_worker_threshold);
            // Another worker in the store's registry may have the step: not
            // stuck then, only not the environment's to run.
            return match rows.run(run_id, read)?.unrunnable {
                Some(unrunnable) => Err(Error::RunUnrunnable {
                    run_id,
                    unrunnable: Box::new(unrunnable),
                }),
                None => Ok(records),
            };
        }
        Ok(records)
    }

    /// Takes the claim on `run_id`'s in-progress step away from the environment,
    /// as a sweep or another worker would while the body runs: when the body ends,
    /// its completion loses the fence, changes nothing and leaves a
    /// `late_completion_ignored` event. Call it while a body is running (from a
    /// body, or while `run_next` runs in another task). Returns whether a step of
    /// the run was in progress.
    #[allow(clippy::must_use_candidate)] // called for its effect
    pub fn lose_claim(&self, run_id: RunId) -> bool {
        self.store().rows().lose_claim(run_id)
    }

    /// A run with its latest 1,000 step attempts, events, signals and
    /// batches, as `Client::run` reads it. Its
    /// [`unrunnable`](RunView::unrunnable) says when its due step is one no
    /// live worker can run: the environment's registered workflows are its
    /// live worker, beside any the store's registry lists (a worker told
    /// dead counts for the environment's lost-worker threshold).
    ///
    /// # Errors
    /// [`Error::RunNotFound`].
    pub fn run(&self, run_id: RunId) -> Result<RunView, Error> {
        let read = RunRead::default().lost_worker_threshold(self.lost_worker_threshold);
        self.store().rows().run(run_id, read)
    }

    /// A run as `read` bounds it, as `Client::run_with` reads it.
    ///
    /// # Errors
    /// [`Error::RunNotFound`].
    pub fn run_with(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        self.store().rows().run(run_id, read)
    }

    /// Runs, newest first, as `Client::list_runs`, and with its shape: a
    /// `Result`, so a test reads the same against either.
    ///
    /// # Errors
    /// [`Error::InvalidInputPath`] for an input path the memory store does
    /// not read (it reads a subset of SQL/JSON paths, see `MemoryStore`).
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        self.store().rows().list_runs(filter)
    }

    /// The memory store the environment drives: what a suite runs against
    /// beside the Postgres store, through the store contract.
    #[must_use]
    pub const fn store(&self) -> &MemoryStore {
        self.runner.store()
    }
}

/// Takes one use of the first fault armed for this step, if any.
fn take_fault(faults: &Mutex<Vec<Fault>>, workflow: &str, step: &str) -> Option<StepError> {
    // The user's closure runs after the lock is released: one that arms
    // another fault (`fail_step`) must not deadlock.
    let error = {
        let mut faults = faults.lock().unwrap_or_else(PoisonError::into_inner);
        let index = faults
            .iter()
            .position(|f| f.workflow == workflow && f.step == step && f.remaining > 0)?;
        faults[index].remaining -= 1;
        let error = Arc::clone(&faults[index].error);
        if faults[index].remaining == 0 {
            faults.remove(index);
        }
        error
    };
    Some(error())
}
