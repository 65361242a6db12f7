//! Building a worker or a sweeper: [`WorkerBuilder`] and [`Sweeper`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tracing::warn;

use super::checks::{check_name, checked_queue_limits, declared_schedules, overridden};
use super::{
    DEFAULT_EAGER_STEPS, DEFAULT_RETENTION, DEFAULT_STALL_THRESHOLD, DEFAULT_UNDEFINED_STEP_GRACE,
    ErrorHook, ErrorReport, Inner, StallAction, SweepReport, UPKEEP_CONNECTIONS, WORKER_TARGET,
    Worker, capped_ms,
};
use crate::database::Database;
use crate::error::Error;
use crate::executor::{Bound, ErasedWorkflow};
use crate::overrides::Overrides;
use crate::store::Runner;
use crate::workflow::Workflow;

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
    name: Option<String>,
    undefined_step_grace: Option<Duration>,
    schedules: Vec<BuilderSchedule>,
    schedule_interval: Duration,
    queue_limits: Vec<(String, u32)>,
    overrides: Option<Overrides>,
}

/// A schedule declared with [`WorkerBuilder::schedule`], checked at build.
pub(super) struct BuilderSchedule {
    pub(super) name: String,
    pub(super) workflow: &'static str,
    pub(super) schedule: crate::schedule::Schedule,
    pub(super) input: Result<serde_json::Value, String>,
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
            name: None,
            undefined_step_grace: Some(DEFAULT_UNDEFINED_STEP_GRACE),
            schedules: Vec::new(),
            schedule_interval: Duration::from_secs(1),
            queue_limits: Vec::new(),
            overrides: None,
        }
    }

    /// The per-deployment overrides this worker runs its workflows with,
    /// and places the fan_out children it starts with, replacing its
    /// database's
    /// ([`DatabaseBuilder::overrides`](crate::DatabaseBuilder::overrides)).
    /// Rarely needed: a deployment's workers usually share the database's,
    /// whatever each registers. Its clients must place first steps with the
    /// same overrides (see [`crate::overrides`]).
    ///
    /// [`WorkerBuilder::build`] checks them against the registered
    /// definitions and refuses any that does not fit one, with
    /// [`Error::InvalidOverride`] naming the workflow, the step and the
    /// option; overrides of workflows it does not register are kept for
    /// its fan_out children, and logged.
    #[must_use]
    pub fn overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = Some(overrides);
        self
    }

    /// At most `limit` steps of `queue` in progress at once, fleet-wide,
    /// whatever their workflow (a queue is a property of the fleet, not of
    /// one workflow): written when the worker registers, and enforced by
    /// every worker's claim, strictly (see the guide's "Flow control"). A
    /// worker that does not declare a queue's limit leaves the one in force
    /// alone; declared again, the last value wins. Eager steps are never
    /// handed on into a limited queue: they go through the claim.
    ///
    /// [`WorkerBuilder::build`] refuses, with [`Error::InvalidSetting`], a
    /// limit of 0 or over [`MAX_CONCURRENCY`](pgbus_core::flow::MAX_CONCURRENCY)
    /// (100,000), and a queue name a start would refuse.
    #[must_use]
    pub fn queue_concurrency(mut self, queue: impl Into<String>, limit: u32) -> Self {
        self.queue_limits.push((queue.into(), limit));
        self
    }

    /// Declares a schedule in code, as `#[workflow(schedule = "...")]` does
    /// for one named after the workflow: every tick of `schedule` starts a
    /// run of `W` with `input`, under the name `name` (see
    /// [`crate::schedule`]). Written when the worker registers (before its
    /// first claim): a new schedule fires from its first tick after that; a
    /// schedule of this name declared in code before takes these values (its
    /// next tick moves only when the expression or zone changed; a pause an
    /// operator set stays); one of this name created through the client is
    /// left alone, with a warning in the log. `W` must be registered.
    ///
    /// [`WorkerBuilder::build`] refuses, with [`Error::InvalidSchedule`]
    /// naming the field, a bad name, expression, zone, catch-up bound or
    /// input, a `W` not registered (`workflow`), and a name declared twice.
    #[must_use]
    pub fn schedule<W: Workflow>(
        mut self,
        name: impl Into<String>,
        schedule: crate::schedule::Schedule,
        input: &W::Input,
    ) -> Self {
        self.schedules.push(BuilderSchedule {
            name: name.into(),
            workflow: W::DEFINITION.name,
            schedule,
            input: serde_json::to_value(input).map_err(|error| error.to_string()),
        });
        self
    }

    /// How often the worker fires the due ticks of its workflows' schedules
    /// while it runs (default 1 s; at least 100 ms). A tick is found at most
    /// this late (plus the pass's own time), well within the 60 s after which
    /// it counts as missed ([`crate::schedule::MISSED_TICK_THRESHOLD_MS`]).
    /// A pass with nothing due is one indexed query.
    #[must_use]
    pub fn schedule_interval(mut self, interval: Duration) -> Self {
        self.schedule_interval = interval.max(Duration::from_millis(100));
        self
    }

    /// A stable name for the worker (default: its id, `worker-<uuid>`), for
    /// logs (the `pgbus.worker_name` field of its `pgbus.worker` span), the
    /// registry (`workers.name`, `pgbus workers`) and the dashboard. Unlike
    /// the id, which is new in every process and fences the rows it claims,
    /// the name may stay the same across restarts (a pod's or a unit's name)
    /// and two workers may share it. 1 to [`MAX_WORKER_NAME_CHARS`](super::MAX_WORKER_NAME_CHARS)
    /// characters, no control characters, not blank, no whitespace at either
    /// end; [`WorkerBuilder::build`] refuses another with
    /// [`Error::InvalidSetting`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How long a due row waits for a worker whose definition has its step
    /// before this worker's sweep pauses the run with
    /// [`StepNotDefined`](crate::StepNotDefined) (default
    /// [`DEFAULT_UNDEFINED_STEP_GRACE`], 5 minutes; at most `36500d`; `None`
    /// never pauses such a row).
    ///
    /// A worker claims only steps its own definition of the workflow has, so
    /// during a rolling deploy a step only the new version has waits for a
    /// new worker, and one only the old version has for an old worker. The
    /// grace ends the wait when no live worker (a heartbeat within the
    /// lost-worker threshold) that registered the workflow has the step: a
    /// step removed or renamed without a `removed_step!` gravestone, once
    /// every old worker is gone, pauses its run (an operator decides) rather
    /// than wait for ever. A row of a workflow no live worker registered at
    /// all is never paused by this: it waits for a worker of that workflow.
    #[must_use]
    pub const fn undefined_step_grace(mut self, grace: Option<Duration>) -> Self {
        self.undefined_step_grace = grace;
        self
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

    /// How long finished and cancelled runs are kept, counted from when they
    /// ended, before the sweep deletes them with their steps, events and signals
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
        self.workflows.push(Arc::new(Bound::new(workflow)));
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
    /// [`WorkerBuilder::listen_url`] whose settings are wrong, and
    /// [`Error::InvalidSetting`] for a [`WorkerBuilder::name`] it refuses,
    /// and [`Error::InvalidOverride`] for an override (the worker's, else
    /// its database's) that does not fit a workflow it registers: a step
    /// the workflow lacks or that is a gravestone, a `wait_timeout` on a
    /// step without `wait_for`, or a value the macro would refuse.
    /// Overrides of workflows it does not register are kept for the fan_out
    /// children it starts, and logged once here (`warn` for a name a typo
    /// away from a registered one, with that name; else `info`).
    pub fn build(self) -> Result<Worker, Error> {
        let pool_size = self.db.pool().status().max_size;
        let needed = self.concurrency.saturating_add(1);
        if pool_size < needed {
            warn!(
                target: WORKER_TARGET,
                {
                    pgbus.pool_size = pool_size,
                    pgbus.concurrency = self.concurrency,
                    pgbus.needed = needed,
                },
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
        let overrides = self
            .overrides
            .unwrap_or_else(|| self.db.overrides.as_ref().clone());
        let registry = overridden(registry, &overrides, runs_steps)?;
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
        let name = match self.name {
            Some(name) => {
                check_name(&name)?;
                name
            }
            None => id.clone(),
        };
        let declared = declared_schedules(&registry, self.schedules, self.db.store.limits)?;
        let queue_limits = checked_queue_limits(self.queue_limits)?;
        let runner = registry
            .into_values()
            .fold(
                Runner::new(self.db.store.clone(), id.clone())
                    .queues(queues.clone())
                    .stall_threshold_ms(capped_ms(self.stall_threshold))
                    .limits(self.db.store.limits),
                Runner::register_erased,
            )
            .bind_overrides(overrides)?;
        Ok(Worker {
            inner: Arc::new(Inner {
                store: self.db.store.clone(),
                upkeep: self.db.with_own_pool(UPKEEP_CONNECTIONS)?,
                listen,
                runner,
                queues,
                workflows,
                id,
                name,
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
                undefined_grace_ms: self.undefined_step_grace.map(capped_ms),
                declared,
                schedule_interval: self.schedule_interval,
                queue_limits,
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
