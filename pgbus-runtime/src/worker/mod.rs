//! The worker: claims due steps of its registered workflows, runs up to N bodies at
//! once, applies their outcomes, and sleeps until woken by `NOTIFY`, the next due
//! time, or the poll interval.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;
use tracing::{Level, debug, error, info, warn};

use crate::connection::Connector;
use crate::database::Database;
use crate::engine::{AttemptResult, RunStatus, StepOutcome};
use crate::error::{Error, display_chain};
use crate::executor::ErasedWorkflow;
use crate::store::{Attempted, Claim, Ended, Observe, PgStore, Runner, SweepSettings};
use crate::workflow::Workflow;

/// An error a policy chose to report, handed to the worker's error hook after the
/// outcome is committed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ErrorReport {
    /// The workflow.
    pub workflow: String,
    /// The run.
    pub run_id: crate::RunId,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: i32,
    /// The error's type name.
    pub class: String,
    /// The error's message.
    pub message: String,
    /// What the engine did about it, e.g. `Reattempt { wait_ms: 2000 }`.
    pub verb: String,
}

type ErrorHook = Arc<dyn Fn(&ErrorReport) + Send + Sync>;

/// Builds a [`Worker`]; from [`Database::worker`].
pub struct WorkerBuilder {
    db: Database,
    workflows: Vec<Arc<dyn ErasedWorkflow>>,
    queues: Vec<String>,
    concurrency: usize,
    poll_interval: Duration,
    stall_threshold: Duration,
    shutdown_grace: Duration,
    notifications: bool,
    listen_url: Option<String>,
    error_hook: Option<ErrorHook>,
    stall_action: StallAction,
    heartbeat_interval: Duration,
    lost_worker_threshold: Duration,
    sweep_interval: Duration,
    retention: Option<Duration>,
    eager_steps: usize,
    run_gauges: bool,
}

/// How many steps of a run one slot runs eagerly in a row by default (see
/// [`WorkerBuilder::eager_steps`]).
pub const DEFAULT_EAGER_STEPS: usize = 16;

/// The stall horizon of a step without a `timeout`, by default: how long a
/// claimed attempt may run before a sweep takes it for stalled. The worker's
/// default and the testkit's one value.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_mins(5);

/// How long finished and cancelled runs are kept by default: 30 days, so the
/// longest insight window (30 d) still sees every run it counts.
pub const DEFAULT_RETENTION: Duration = Duration::from_hours(24 * 30);

/// Connections a worker keeps apart for its heartbeats and sweeps, so bodies
/// that hold every connection of the main pool (through `Database::pool`, or
/// long transactions) cannot make a healthy worker look dead.
pub const UPKEEP_CONNECTIONS: usize = 2;

/// How many runs one retention batch deletes; a sweep deletes at most
/// [`RETENTION_BATCHES`] batches, so no sweep holds locks or runs long.
pub const RETENTION_BATCH: i64 = 500;
/// How many retention batches one sweep deletes at most.
pub const RETENTION_BATCHES: usize = 10;
/// How long a worker row may go without a heartbeat before the sweep removes it
/// (at least the lost-worker threshold).
pub const WORKER_ROW_EXPIRY: Duration = Duration::from_hours(1);

pub use crate::engine::StallAction;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Stalled attempts repaired with the stall action.
    pub repaired: usize,
    /// Stalled attempts that ended on their own before the sweep got to them.
    pub left_alone: usize,
    /// Finished and cancelled runs deleted by retention.
    pub runs_deleted: u64,
    /// Worker rows removed after a long silence.
    pub workers_removed: u64,
    /// Fan-out batches whose children had all ended without the count reaching
    /// the batch, resolved now (their parents woken).
    pub batches_resolved: u64,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("queues", &self.queues)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    pub(crate) fn new(db: Database) -> Self {
        Self {
            db,
            workflows: Vec::new(),
            queues: Vec::new(),
            concurrency: 8,
            poll_interval: Duration::from_secs(1),
            stall_threshold: DEFAULT_STALL_THRESHOLD,
            shutdown_grace: Duration::from_secs(30),
            notifications: true,
            listen_url: None,
            error_hook: None,
            stall_action: StallAction::Pause,
            heartbeat_interval: Duration::from_secs(5),
            lost_worker_threshold: Duration::from_secs(30),
            sweep_interval: Duration::from_secs(10),
            retention: Some(DEFAULT_RETENTION),
            eager_steps: DEFAULT_EAGER_STEPS,
            run_gauges: false,
        }
    }

    /// Whether each sweep sets the `pgbus_runs` gauge (runs per status that is
    /// not an end: `ready`, `performing`, `paused`), off by default: it counts
    /// with a scan of the runs table (bounded by retention), so turn it on in
    /// one worker, or a few, where a metrics recorder is installed.
    #[must_use]
    pub const fn run_gauges(mut self, on: bool) -> Self {
        self.run_gauges = on;
        self
    }

    /// How many steps of a run one slot may run eagerly in a row (default
    /// [`DEFAULT_EAGER_STEPS`]; 0 sends every step through the queue).
    ///
    /// When an attempt's outcome schedules the run's next step due at once, on
    /// one of this worker's queues, as a first attempt that waits for no
    /// signal, the outcome's transaction claims it for this worker, and the
    /// slot runs it next: one transaction per step instead of two, and no
    /// pickup wait. The step is claimed exactly as a claim would (`in_progress`,
    /// the worker id, a stall horizon, a `step_started` event), so stalls,
    /// heartbeats, sweeps and operator actions treat it the same. The cost is
    /// fairness: a slot running a run's steps eagerly does not look at the
    /// queue meanwhile, so a step of another run, even of a lower priority
    /// number, waits for a free slot up to this many steps longer.
    /// [`Worker::run_until`] and [`Worker::run_until_idle`] run steps eagerly;
    /// [`Worker::run_once`] runs the attempts it claimed and no more. The idea
    /// is Temporal's eager activity execution (the worker that schedules an
    /// activity may start it itself, bypassing the task queue).
    #[must_use]
    pub const fn eager_steps(mut self, steps: usize) -> Self {
        self.eager_steps = steps;
        self
    }

    /// How long finished and cancelled runs are kept, counted from their last
    /// change, before the sweep deletes them with their steps, events and signals
    /// (default [`DEFAULT_RETENTION`], 30 days; at most `36500d`, a longer one is
    /// cut to it); `None` keeps them forever.
    #[must_use]
    pub const fn retention(mut self, retention: Option<Duration>) -> Self {
        self.retention = retention;
        self
    }

    /// What the sweep does with a stalled attempt (default: pause the run).
    #[must_use]
    pub const fn stall_action(mut self, action: StallAction) -> Self {
        self.stall_action = action;
        self
    }

    /// How often the worker refreshes its heartbeat while it runs (default 5 s).
    #[must_use]
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval.max(Duration::from_millis(100));
        self
    }

    /// How old a worker's heartbeat may be before its attempts count as lost
    /// (default 30 s; at most `36500d`).
    #[must_use]
    pub const fn lost_worker_threshold(mut self, threshold: Duration) -> Self {
        self.lost_worker_threshold = threshold;
        self
    }

    /// How often the worker sweeps while it runs (default 10 s).
    #[must_use]
    pub fn sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval.max(Duration::from_millis(100));
        self
    }

    /// Registers a workflow value. The worker claims only steps of registered
    /// workflows; steps of others wait for a worker that has them (a rolling
    /// deploy defers, never fails).
    #[must_use]
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.workflows.push(Arc::new(workflow));
        self
    }

    /// Adds a queue to claim from. Without any, the worker claims from every queue
    /// its registered workflows use.
    #[must_use]
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }

    /// How many step bodies run at once (default 8).
    #[must_use]
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// How often to look for due steps when nothing wakes the worker (default 1 s).
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The stall horizon of steps without a `timeout` (default 5 minutes; at most
    /// `36500d`, like every duration option: a longer one is cut to it).
    #[must_use]
    pub const fn stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall_threshold = threshold;
        self
    }

    /// How long running bodies may take to finish after shutdown begins (default
    /// 30 s); those still running then are dropped, and their rows are left for
    /// the sweep.
    #[must_use]
    pub const fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Whether to wake on `LISTEN/NOTIFY` (default on). Off, or behind a pooler
    /// that cannot hold a listening session, the worker polls.
    #[must_use]
    pub const fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }

    /// Where the worker's `LISTEN` session connects: a libpq URL or key-value
    /// string of a direct connection to the same database, bypassing a
    /// transaction-mode pooler (which hands each transaction to any server
    /// connection, so a `LISTEN` through it would hear nothing). By default
    /// the session uses the database's own URL, except behind a pooler
    /// ([`crate::DatabaseBuilder::transaction_pooler`]), where a worker given no direct
    /// URL polls every [`WorkerBuilder::poll_interval`] and says so once in
    /// its log. Only `LISTEN` uses it: one connection, held while the worker
    /// runs, reconnected with backoff.
    #[must_use]
    pub fn listen_url(mut self, url: impl Into<String>) -> Self {
        self.listen_url = Some(url.into());
        self
    }

    /// Called with every error a policy reports, after its outcome is committed.
    #[must_use]
    pub fn on_error(mut self, hook: impl Fn(&ErrorReport) + Send + Sync + 'static) -> Self {
        self.error_hook = Some(Arc::new(hook));
        self
    }

    /// Builds the worker.
    ///
    /// A worker of concurrency `N` holds up to `N + 1` connections of the
    /// database's pool at once (see [`crate::DEFAULT_POOL_SIZE`]); when the
    /// pool is smaller, this logs a warning (`warn`) once: the worker still
    /// works, its slots waiting for connections, and a pool shared on purpose
    /// with a tight server limit may be the right call.
    ///
    /// # Errors
    /// [`Error::DuplicateWorkflow`] when two registered values share a name,
    /// [`Error::NothingToRun`] without any workflow, [`Error::BuildPool`]
    /// when the pool of its upkeep connections cannot be built, and
    /// [`Error::InvalidSetting`] or [`Error::UnreadableFile`] for a
    /// [`WorkerBuilder::listen_url`] whose settings are wrong.
    pub fn build(self) -> Result<Worker, Error> {
        let pool_size = self.db.pool().status().max_size;
        let needed = self.concurrency.saturating_add(1);
        if pool_size < needed {
            warn!(
                pgbus.pool_size = pool_size,
                pgbus.concurrency = self.concurrency,
                pgbus.needed = needed,
                "the pool is smaller than the worker's concurrency plus one; slots will wait for connections (raise `DatabaseBuilder::pool_size`)"
            );
        }
        self.build_with(true)
    }

    /// A [`Sweeper`] with this builder's stall action, lost-worker threshold
    /// and retention: sweeps without running steps, and without the
    /// workflows' code if none are registered (then a stalled attempt of a
    /// workflow it does not know pauses its run, whatever the stall action,
    /// since reattempting needs the step's definition).
    ///
    /// # Errors
    /// [`Error::DuplicateWorkflow`], and pool errors.
    pub fn sweeper(self) -> Result<Sweeper, Error> {
        self.build_with(false).map(|worker| Sweeper { worker })
    }

    fn build_with(self, runs_steps: bool) -> Result<Worker, Error> {
        let mut registry: HashMap<&'static str, Arc<dyn ErasedWorkflow>> = HashMap::new();
        let mut queues = self.queues;
        for workflow in self.workflows {
            let definition = workflow.definition();
            if registry.contains_key(definition.name) {
                return Err(Error::DuplicateWorkflow {
                    workflow: definition.name.to_owned(),
                });
            }
            registry.insert(definition.name, workflow);
        }
        if runs_steps && registry.is_empty() {
            return Err(Error::NothingToRun);
        }
        if queues.is_empty() {
            for workflow in registry.values() {
                let definition = workflow.definition();
                queues.push(definition.queue.to_owned());
                queues.extend(
                    definition
                        .entries
                        .iter()
                        .filter_map(|e| e.options.queue)
                        .map(str::to_owned),
                );
            }
        }
        queues.sort();
        queues.dedup();
        let mut workflows: Vec<String> = registry.keys().map(|name| (*name).to_owned()).collect();
        workflows.sort();
        // Behind a pooler only a direct URL can hold a `LISTEN` session.
        let listen = match self.listen_url {
            Some(url) => Some(Arc::new(crate::connection::connector(
                &url,
                &crate::connection::Settings::default(),
                &crate::connection::env::process_env,
                &crate::connection::env::os_user,
            )?)),
            None if self.db.transaction_pooler() => None,
            None => self.db.connector.clone(),
        };
        let id = format!("worker-{}", uuid::Uuid::new_v4());
        let runner = registry.into_values().fold(
            Runner::new(self.db.store.clone(), id.clone())
                .queues(queues.clone())
                .stall_threshold_ms(capped_ms(self.stall_threshold))
                .limits(self.db.store.limits),
            Runner::register_erased,
        );
        Ok(Worker {
            inner: Arc::new(Inner {
                store: self.db.store.clone(),
                upkeep: self.db.with_own_pool(UPKEEP_CONNECTIONS)?,
                listen,
                runner,
                queues,
                workflows,
                id,
                concurrency: self.concurrency,
                poll_interval: self.poll_interval,
                shutdown_grace: self.shutdown_grace,
                notifications: self.notifications,
                error_hook: self.error_hook,
                stall_action: self.stall_action,
                heartbeat_interval: self.heartbeat_interval,
                lost_worker_ms: capped_ms(self.lost_worker_threshold),
                sweep_interval: self.sweep_interval,
                retention_ms: self.retention.map(capped_ms),
                eager_steps: self.eager_steps,
                run_gauges: self.run_gauges,
                registered: AtomicBool::new(false),
                loops: std::sync::atomic::AtomicUsize::new(0),
                suspects: std::sync::Mutex::new(std::collections::HashSet::new()),
                running: std::sync::Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// Runs the sweep alone: from [`WorkerBuilder::sweeper`], for a cron job or an
/// operator (`pgbus sweep`) rather than a worker's loop.
#[derive(Debug, Clone)]
pub struct Sweeper {
    worker: Worker,
}

impl Sweeper {
    /// One sweep, as [`Worker::sweep`].
    ///
    /// # Errors
    /// Database errors.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        self.worker.sweep().await
    }
}

/// Claims and runs steps. Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.inner.id)
            .field("queues", &self.inner.queues)
            .field("workflows", &self.inner.workflows)
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: PgStore,
    /// The same database on a pool of its own, for heartbeats and sweeps.
    upkeep: PgStore,
    /// How to open the `LISTEN` connection: the database's own settings, or
    /// [`WorkerBuilder::listen_url`]'s; `None` for a pool handed in alone, or
    /// behind a pooler without a direct URL (the worker then polls).
    listen: Option<Arc<Connector>>,
    /// The step loop over `store`, with the registered workflows.
    runner: Runner<PgStore>,
    queues: Vec<String>,
    workflows: Vec<String>,
    id: String,
    concurrency: usize,
    poll_interval: Duration,
    shutdown_grace: Duration,
    notifications: bool,
    error_hook: Option<ErrorHook>,
    stall_action: StallAction,
    heartbeat_interval: Duration,
    lost_worker_ms: i64,
    sweep_interval: Duration,
    retention_ms: Option<i64>,
    eager_steps: usize,
    run_gauges: bool,
    /// Cancellation tokens of the attempts running here, by step id: cancelled
    /// when a heartbeat finds the claim lost.
    running: std::sync::Mutex<HashMap<i64, CancellationToken>>,
    /// How many `run_until` loops of this worker (and its clones) are running: the
    /// last one to stop removes the worker row.
    loops: std::sync::atomic::AtomicUsize,
    /// Attempts the last heartbeat found in progress under this worker's id but
    /// not running here: handed to the sweep if the next one finds them again.
    suspects: std::sync::Mutex<std::collections::HashSet<i64>>,
    /// Whether the worker row exists (claims write this worker's id on rows the
    /// sweep checks against it).
    registered: AtomicBool,
}

impl Worker {
    /// This worker's id, as written on the step rows it claims.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The queues it claims from.
    #[must_use]
    pub fn queues(&self) -> &[String] {
        &self.inner.queues
    }

    /// Starts the `LISTEN` task, when notifications are on and there is
    /// somewhere to listen; without (a pool handed in alone, or behind a
    /// pooler without [`WorkerBuilder::listen_url`]) says once, at `info`,
    /// that the worker polls.
    fn spawn_listener(
        &self,
        wake: &Arc<Notify>,
        stop: &Arc<AtomicBool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let inner = &self.inner;
        if !inner.notifications {
            return None;
        }
        let Some(connector) = inner.listen.clone() else {
            info!(
                pgbus.worker = %inner.id,
                pgbus.poll_interval = ?inner.poll_interval,
                "no LISTEN connection (a pool handed in alone, or a transaction pooler \
                 without WorkerBuilder::listen_url): polling for work"
            );
            return None;
        };
        Some(tokio::spawn(listen(
            connector,
            inner.store.schema.channel(),
            Arc::clone(wake),
            Arc::clone(stop),
        )))
    }

    /// Runs until `shutdown` completes, then stops claiming and lets running
    /// bodies finish within the grace period.
    ///
    /// Database errors do not end the loop: they are logged once, and the worker
    /// retries with backoff until the database answers again.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for fatal setup errors.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let inner = &self.inner;
        inner.loops.fetch_add(1, Ordering::AcqRel);
        info!(
            pgbus.worker = %inner.id,
            pgbus.workflows = ?inner.workflows,
            pgbus.queues = ?inner.queues,
            pgbus.concurrency = inner.concurrency,
            "worker started"
        );
        if let Err(error) = self.ensure_registered().await {
            // The first claim tries again; claims fail until the row exists.
            warn!(pgbus.worker = %inner.id, error = %display_chain(&error), "could not record the worker row yet");
        }

        let wake = Arc::new(Notify::new());
        let stop_listening = Arc::new(AtomicBool::new(false));
        let listener = self.spawn_listener(&wake, &stop_listening);

        let upkeep = tokio::spawn(self.clone().upkeep());

        let slots = Arc::new(Semaphore::new(inner.concurrency));
        // Set once shutdown begins: slots stop taking steps eagerly.
        let stopping = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let mut failures = Failures::default();
        let mut shutdown = std::pin::pin!(shutdown);

        loop {
            let free = slots.available_permits();
            let mut sleep_for = inner.poll_interval;
            if free > 0 {
                match self.claim(free).await {
                    Ok(claimed) => {
                        failures.recovered();
                        let full = claimed.len() == free;
                        for (claim, running) in claimed {
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                                break;
                            };
                            let worker = self.clone();
                            let stopping = Arc::clone(&stopping);
                            tasks.spawn(async move {
                                worker.run_claim(claim, running, &stopping).await;
                                drop(permit);
                            });
                        }
                        if full {
                            continue;
                        }
                        if let Ok(Some(due_in)) = inner
                            .store
                            .next_due_ms(&inner.queues, &inner.workflows)
                            .await
                        {
                            // A step due now that the claim skipped is locked by
                            // someone else: look again shortly, not at once.
                            let due_in =
                                Duration::from_millis(u64::try_from(due_in.max(25)).unwrap_or(25));
                            sleep_for = sleep_for.min(due_in);
                        }
                    }
                    Err(error) => sleep_for = failures.failed(&error),
                }
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = wake.notified() => {}
                () = tokio::time::sleep(sleep_for) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }

        info!(pgbus.worker = %inner.id, pgbus.running = tasks.len(), "worker stopping");
        stopping.store(true, Ordering::Release);
        stop_listening.store(true, Ordering::Relaxed);
        if let Some(listener) = listener {
            listener.abort();
        }
        // Heartbeats go on while bodies drain, so their claims are not taken
        // for lost.
        let drained = tokio::time::timeout(inner.shutdown_grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        upkeep.abort();
        if drained.is_err() {
            warn!(
                pgbus.worker = %inner.id,
                pgbus.abandoned = tasks.len(),
                "shutdown grace ran out; abandoning running bodies to the sweep"
            );
            tasks.abort_all();
            // Let the aborted bodies be dropped (each takes its claim off the
            // running list as it goes).
            while tasks.join_next().await.is_some() {}
        }
        // The last loop to stop removes the row, unless bodies still run here
        // (another clone's `run_once`): whatever this worker abandoned then
        // counts as lost at once. A later claim writes the row again.
        let last = inner.loops.fetch_sub(1, Ordering::AcqRel) == 1;
        let idle = inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        if last && idle {
            inner.registered.store(false, Ordering::Release);
            if let Err(error) = inner.store.delete_workers(Some(&inner.id), None).await {
                debug!(error = %display_chain(&error), "could not remove the worker row");
            }
        }
        info!(pgbus.worker = %inner.id, "worker stopped");
        Ok(())
    }

    /// Writes the worker row once, before the first claim: claims put this id on
    /// step rows, and the sweep checks those against the row's heartbeat.
    async fn ensure_registered(&self) -> Result<(), Error> {
        let inner = &self.inner;
        if !inner.registered.swap(true, Ordering::AcqRel) {
            let pid = i32::try_from(std::process::id()).unwrap_or(0);
            if let Err(error) = inner
                .store
                .register_worker(&inner.id, &host(), pid, &inner.queues)
                .await
            {
                inner.registered.store(false, Ordering::Release);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Heartbeats and sweeps on their intervals while the worker runs.
    async fn upkeep(self) {
        let inner = &self.inner;
        let mut heartbeat = tokio::time::interval(inner.heartbeat_interval);
        let mut sweep = tokio::time::interval(inner.sweep_interval);
        loop {
            tokio::select! {
                _ = heartbeat.tick() => {
                    if inner.registered.load(Ordering::Acquire)
                        && let Err(error) = self.heartbeat().await
                    {
                        debug!(error = %display_chain(&error), "heartbeat failed");
                    }
                }
                _ = sweep.tick() => {
                    match self.sweep().await {
                        Ok(report) => {
                            if report.repaired > 0 {
                                // Each repair logged its own line.
                                debug!(pgbus.repaired = report.repaired, "sweep repaired stalled attempts");
                            }
                            if report.runs_deleted > 0 || report.workers_removed > 0 {
                                info!(
                                    pgbus.runs_deleted = report.runs_deleted,
                                    pgbus.workers_removed = report.workers_removed,
                                    "sweep applied retention"
                                );
                            }
                        }
                        Err(error) => debug!(error = %display_chain(&error), "sweep failed"),
                    }
                }
            }
        }
    }

    /// Refreshes this worker's heartbeat, writes its row again if the sweep
    /// removed it, and tells the bodies whose attempts lost their claim (the run
    /// was cancelled, the sweep stalled the attempt, or another worker claimed
    /// it) through [`StepCx::cancelled`](crate::StepCx::cancelled). `run_until`
    /// does this every heartbeat interval; call it yourself when you drive the
    /// worker with `run_once`.
    ///
    /// # Errors
    /// Database errors.
    pub async fn heartbeat(&self) -> Result<(), Error> {
        let inner = &self.inner;
        let running: Vec<i64> = inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        let beat = inner.upkeep.heartbeat(&inner.id, &running).await?;
        // Claimed in the database, unknown here: a claim whose reply was lost
        // with the connection, or a body that could not record its outcome. A
        // claim still on its way back looks the same for a moment, so only rows
        // that two heartbeats in a row report, and that are still not running
        // here, are handed to the sweep (now rather than at their stall horizon).
        let orphans: Vec<i64> = {
            let running = inner
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut suspects = inner
                .suspects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let confirmed = beat
                .orphans
                .iter()
                .copied()
                .filter(|id| suspects.contains(id) && !running.contains_key(id))
                .collect();
            *suspects = beat.orphans.iter().copied().collect();
            confirmed
        };
        if !orphans.is_empty() {
            let released = inner.upkeep.release_orphans(&inner.id, &orphans).await?;
            warn!(
                pgbus.worker = %inner.id,
                pgbus.released = released,
                "attempts held in the database but not running here; handing them to the sweep"
            );
        }
        let (present, lost) = (beat.present, beat.lost);
        if !present {
            warn!(pgbus.worker = %inner.id, "the worker row was gone; writing it again");
            inner.registered.store(false, Ordering::Release);
            self.ensure_registered().await?;
        }
        if !lost.is_empty() {
            let running = inner
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for step_id in lost {
                if let Some(token) = running.get(&step_id) {
                    info!(
                        pgbus.step_id = step_id,
                        "attempt lost its claim; telling its body"
                    );
                    token.cancel();
                }
            }
        }
        Ok(())
    }

    /// Repairs stalled attempts once: each in-progress attempt past its stall
    /// horizon (detection `timeout`) or held by a worker whose heartbeat is older
    /// than the lost-worker threshold (detection `worker_lost`) ends with a
    /// [`StepStalled`](crate::StepStalled) error, the stall action and a
    /// `stall_detected` event. Fenced: an attempt that ended meanwhile is left
    /// alone. Then retention: finished and cancelled runs last changed before the
    /// retention age are deleted with their rows, at most [`RETENTION_BATCHES`]
    /// batches of [`RETENTION_BATCH`] per sweep (the next sweep goes on), and
    /// worker rows silent for [`WORKER_ROW_EXPIRY`] are removed. Safe to run from
    /// many workers at once (`SKIP LOCKED`, fenced updates); runs inside
    /// `run_until` on the sweep interval.
    ///
    /// # Errors
    /// Database errors.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        let inner = &self.inner;
        let settings = SweepSettings {
            stall_action: inner.stall_action,
            lost_ms: inner.lost_worker_ms,
            retention_ms: inner.retention_ms,
            stalled_limit: 100,
            batch_limit: 100,
            retention_batch: RETENTION_BATCH,
            retention_batches: RETENTION_BATCHES,
        };
        let mut report = crate::store::sweep(
            &inner.upkeep,
            &settings,
            |workflow| inner.runner.definition(workflow),
            |repaired| {
                if let Some(record) = &repaired.result.error {
                    self.report(
                        &repaired.stalled.claim,
                        repaired.result,
                        record,
                        failure_level(repaired.plan.step_outcome),
                        crate::store::repair_message(repaired.plan),
                    );
                }
            },
        )
        .await?;
        if inner.run_gauges {
            let counts = inner.upkeep.run_status_counts().await?;
            for status in [RunStatus::Ready, RunStatus::Performing, RunStatus::Paused] {
                let runs = counts
                    .iter()
                    .find(|(s, _)| s == status.as_str())
                    .map_or(0, |(_, n)| *n);
                #[allow(clippy::cast_precision_loss)] // run counts far below 2^52
                metrics::gauge!(crate::metric::RUNS, "status" => status.as_str()).set(runs as f64);
            }
        }
        let silent_ms = capped_ms(WORKER_ROW_EXPIRY).max(inner.lost_worker_ms);
        report.workers_removed = inner.upkeep.delete_workers(None, Some(silent_ms)).await?;
        Ok(report)
    }

    /// Claims what is due now (up to the concurrency) and runs it all to the end,
    /// one attempt per claim (never eagerly: the next step of a run goes back
    /// to the queue). Returns how many attempts ran. Meant for tests and
    /// scripts that go step by step.
    ///
    /// # Errors
    /// Database errors from the claim.
    pub async fn run_once(&self) -> Result<usize, Error> {
        self.run_claimed(false).await
    }

    /// Claims and runs until nothing is due now. Steps run eagerly as under
    /// [`Worker::run_until`] (a slot goes on with a run's next step when it is
    /// due at once, up to [`WorkerBuilder::eager_steps`] in a row), so the
    /// runs move as a long-running worker would move them. Returns how many
    /// attempts ran.
    ///
    /// # Errors
    /// Database errors from a claim.
    pub async fn run_until_idle(&self) -> Result<usize, Error> {
        let mut total = 0;
        loop {
            let ran = self.run_claimed(true).await?;
            if ran == 0 {
                return Ok(total);
            }
            total += ran;
        }
    }

    /// One claim and its attempts to the end, eagerly or not; how many
    /// attempts ran.
    async fn run_claimed(&self, eager: bool) -> Result<usize, Error> {
        let claimed = self.claim(self.inner.concurrency).await?;
        let mut tasks = JoinSet::new();
        // Set: no slot takes a step eagerly.
        let stopping = Arc::new(AtomicBool::new(!eager));
        for (claim, running) in claimed {
            let worker = self.clone();
            let stopping = Arc::clone(&stopping);
            tasks.spawn(async move { worker.run_claim(claim, running, &stopping).await });
        }
        let mut count = 0;
        while let Some(ran) = tasks.join_next().await {
            count += ran.unwrap_or(1);
        }
        Ok(count)
    }

    /// Claims up to `limit` attempts and puts each on the running list before
    /// returning, so a heartbeat never takes a fresh claim for an orphan.
    async fn claim(&self, limit: usize) -> Result<Vec<(Claim, Running)>, Error> {
        self.ensure_registered().await?;
        let inner = &self.inner;
        let claimed = inner.runner.claim(&inner.queues, limit).await?;
        let hooks = Hooks(self);
        Ok(claimed
            .into_iter()
            .map(|claim| {
                let running = hooks.track(&claim);
                (claim, running)
            })
            .collect())
    }

    /// Runs one claimed attempt and records its outcome; then, while the
    /// outcome hands this worker the run's next step (see
    /// [`WorkerBuilder::eager_steps`]) and `stopping` is not set, runs that one
    /// too, up to the eager limit.
    /// Returns how many attempts ran (the claimed one and those taken eagerly).
    async fn run_claim(&self, claim: Claim, running: Running, stopping: &AtomicBool) -> usize {
        let inner = &self.inner;
        inner
            .runner
            .run_claim(claim, running, &Hooks(self), inner.eager_steps, stopping)
            .await
    }

    /// A `tracing` event at `level` and the error hook, after commit. The
    /// message is a step's own text: logged with `?`, escaped, so a line
    /// break or a terminal escape in it cannot forge or hide log lines.
    fn report(
        &self,
        claim: &Claim,
        result: &AttemptResult,
        error: &crate::engine::ErrorRecord,
        level: Level,
        message: &str,
    ) {
        let verb = result.verb.name();
        if level == Level::ERROR {
            error!(
                error.class = %error.class,
                error.message = ?error.message,
                pgbus.verb = verb,
                "{message}"
            );
        } else {
            warn!(
                error.class = %error.class,
                error.message = ?error.message,
                pgbus.verb = verb,
                "{message}"
            );
        }
        if let Some(hook) = &self.inner.error_hook {
            hook(&ErrorReport {
                workflow: claim.workflow.clone(),
                run_id: claim.run_id,
                step: claim.step_name.clone(),
                attempt: claim.attempt,
                class: error.class.clone(),
                message: error.message.clone(),
                verb: format!("{:?}", result.verb),
            });
        }
    }
}

/// The worker as the observer of its runner's attempts: each on the running
/// list while it runs, and error reports after commit.
struct Hooks<'a>(&'a Worker);

impl Observe for Hooks<'_> {
    type Tracked = Running;

    fn track(&self, claim: &Claim) -> Running {
        Running::new(
            Arc::clone(&self.0.inner),
            claim.step_id,
            claim.cancellation.clone(),
        )
    }

    fn attempted(&self, attempted: &Attempted<'_>) {
        let Some(Ended::Applied(plan) | Ended::Continued(plan, _)) = attempted.ended else {
            return;
        };
        let (claim, result) = (attempted.claim, attempted.result);
        if let (true, Some(error)) = (result.report, &result.error) {
            self.0.report(
                claim,
                result,
                error,
                failure_level(plan.step_outcome),
                "step failed",
            );
        }
        if let Some(error) = &result.handler_error {
            self.0.report(
                claim,
                result,
                error,
                Level::ERROR,
                "exception handler failed; the run is paused",
            );
        }
    }
}

/// An attempt on the worker's running list for as long as it lives: taken off
/// when its task ends, or is dropped at shutdown.
struct Running {
    inner: Arc<Inner>,
    step_id: i64,
}

impl Running {
    fn new(inner: Arc<Inner>, step_id: i64, cancellation: CancellationToken) -> Self {
        inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(step_id, cancellation);
        Self { inner, step_id }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.step_id);
    }
}

/// A duration in milliseconds for SQL interval arithmetic: at most `36500d`, the
/// longest duration the option grammar accepts, so `now - it` never leaves the
/// range of a `timestamptz`. What the worker (and the testkit) does with every
/// configured duration.
#[must_use]
pub fn capped_ms(duration: Duration) -> i64 {
    i64::try_from(
        duration
            .as_millis()
            .min(u128::from(pgbus_core::MAX_DURATION_MS)),
    )
    .unwrap_or(i64::MAX)
}

/// Consecutive failures of one kind of database call, and the growing pause
/// between tries: from `first_pause`, doubling, up to `longest_pause`, each cut
/// by up to a quarter at random so workers that failed together do not come back
/// in step. The claim loop logs the first failure of a streak (`warn` when it is
/// a connection or server going away, `error` otherwise), the others only at
/// `debug`, and the recovery once at `info`: one outage, one line each way,
/// however long it lasts.
pub(crate) struct Failures {
    pub(crate) count: u32,
    first_pause: Duration,
    longest_pause: Duration,
}

impl Default for Failures {
    /// The claim loop's: 100 ms doubling up to 5 s.
    fn default() -> Self {
        Self::with_pauses(Duration::from_millis(100), Duration::from_secs(5))
    }
}

impl Failures {
    pub(crate) const fn with_pauses(first_pause: Duration, longest_pause: Duration) -> Self {
        Self {
            count: 0,
            first_pause,
            longest_pause,
        }
    }

    /// Counts a failed claim round, logs it (see above) and returns the pause
    /// before the next.
    fn failed(&mut self, error: &Error) -> Duration {
        if self.record() {
            if error.is_transient() {
                warn!(error = %display_chain(error), "database unavailable; retrying with backoff");
            } else {
                error!(error = %display_chain(error), "database call failed; retrying with backoff");
            }
        } else {
            debug!(error = %display_chain(error), pgbus.failures = self.count, "database still failing");
        }
        self.pause()
    }

    /// Counts a failure; whether it is the first of a streak.
    pub(crate) fn record(&mut self) -> bool {
        self.count = self.count.saturating_add(1);
        self.count == 1
    }

    /// The pause after the failures counted so far.
    pub(crate) fn pause(&self) -> Duration {
        let doublings = self.count.saturating_sub(1).min(16);
        let full = self
            .first_pause
            .saturating_mul(1 << doublings)
            .min(self.longest_pause);
        let noise = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            self.count,
        ) % 1024;
        full.saturating_sub((full / 4).mul_f64(noise as f64 / 1024.0))
    }

    fn recovered(&mut self) {
        if self.count > 0 {
            info!(pgbus.failures = self.count, "database answers again");
        }
        self.count = 0;
    }
}

/// Holds a `LISTEN` connection and turns notifications into wake-ups. Reconnects
/// with backoff; while it is down the worker still polls. An outage is logged
/// once when it begins (`warn`) and once when the session is back (`info`).
async fn listen(
    connector: Arc<Connector>,
    channel: String,
    wake: Arc<Notify>,
    stop: Arc<AtomicBool>,
) {
    let mut failures = Failures::default();
    // Whether the session is known to be gone (logged already).
    let mut down = false;
    while !stop.load(Ordering::Relaxed) {
        let ended = listen_once(&connector, &channel, &wake, &mut down).await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if down {
            if let Err(error) = &ended {
                debug!(error = %display_chain(error), "notification connection still failing");
            }
        } else {
            // It was listening (or never tried): the outage begins now, and the
            // first reconnect comes quickly.
            down = true;
            failures = Failures::default();
            match &ended {
                Ok(()) => warn!("notification connection closed; polling until it is back"),
                Err(error) => warn!(
                    error = %display_chain(error),
                    "notification connection lost; polling until it is back"
                ),
            }
        }
        failures.record();
        tokio::time::sleep(failures.pause()).await;
    }
}

/// One `LISTEN` session: connects, listens, wakes the worker on each
/// notification, and returns when the connection ends: `Ok` when the server
/// closed it cleanly, else why it failed. Clears `down` (and says the session is
/// back) once `LISTEN` took.
async fn listen_once(
    connector: &Connector,
    channel: &str,
    wake: &Arc<Notify>,
    down: &mut bool,
) -> Result<(), Error> {
    let (client, mut connection) = connector.connect().await?;
    let notify = Arc::clone(wake);
    // The connection has to be driven for anything, LISTEN included, to happen;
    // the driver ends with the connection and says why it ended.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => notify.notify_one(),
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    if let Err(error) = client.batch_execute(&format!("LISTEN \"{channel}\"")).await {
        driver.abort();
        return Err(error.into());
    }
    if std::mem::take(down) {
        info!("notification connection is back");
    }
    debug!(channel, "listening for wake-ups");
    // Something may have become due while nobody listened.
    wake.notify_one();
    // `client` lives until the connection ends: dropping it would close the
    // session.
    let ended = driver.await;
    drop(client);
    match ended {
        Ok(Ok(())) | Err(_) => Ok(()),
        Ok(Err(error)) => Err(error.into()),
    }
}

fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map_or_else(|| "unknown".to_owned(), |h| h.trim().to_owned())
}

/// The level of a failed attempt's report: `warn` when the run goes on with
/// another attempt (a recovery under way, such as a stalled attempt of a killed
/// worker run again), `error` when the failure paused, cancelled or skipped
/// (work that did not get done and may need an operator).
fn failure_level(outcome: StepOutcome) -> Level {
    if outcome == StepOutcome::Reattempted {
        Level::WARN
    } else {
        Level::ERROR
    }
}
