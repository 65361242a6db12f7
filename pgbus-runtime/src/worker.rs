//! The worker: claims due steps of its registered workflows, runs up to N bodies at
//! once, applies their outcomes, and sleeps until woken by `NOTIFY`, the next due
//! time, or the poll interval.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_postgres::{AsyncMessage, NoTls};
use tracing::{Instrument as _, debug, error, info, info_span, warn};

use crate::database::Database;
use crate::engine::AttemptResult;
use crate::error::{Error, display_chain};
use crate::executor::{AttemptInput, ErasedWorkflow};
use crate::pg::store::{Claimed, Ended, PgStore};
use crate::workflow::Workflow;

/// An error a policy chose to report, handed to the worker's error hook after the
/// outcome is committed.
#[derive(Debug, Clone)]
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
    error_hook: Option<ErrorHook>,
    stall_action: StallAction,
    heartbeat_interval: Duration,
    lost_worker_threshold: Duration,
    sweep_interval: Duration,
}

/// What the sweep does with a stalled attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StallAction {
    /// Pause the run (the default); an operator decides.
    #[default]
    Pause,
    /// Run the step again after `wait` (only for workflows this worker registered;
    /// others are paused).
    Reattempt {
        /// Delay before the new attempt.
        wait: Duration,
    },
    /// Cancel the run.
    Cancel,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Stalled attempts repaired with the stall action.
    pub repaired: usize,
    /// Stalled attempts that ended on their own before the sweep got to them.
    pub left_alone: usize,
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
            stall_threshold: Duration::from_mins(5),
            shutdown_grace: Duration::from_secs(30),
            notifications: true,
            error_hook: None,
            stall_action: StallAction::Pause,
            heartbeat_interval: Duration::from_secs(5),
            lost_worker_threshold: Duration::from_secs(30),
            sweep_interval: Duration::from_secs(10),
        }
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
    /// (default 30 s).
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

    /// Called with every error a policy reports, after its outcome is committed.
    #[must_use]
    pub fn on_error(mut self, hook: impl Fn(&ErrorReport) + Send + Sync + 'static) -> Self {
        self.error_hook = Some(Arc::new(hook));
        self
    }

    /// Builds the worker.
    ///
    /// # Errors
    /// [`Error::DuplicateWorkflow`] when two registered values share a name, and
    /// [`Error::NothingToRun`] without any workflow.
    pub fn build(self) -> Result<Worker, Error> {
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
        if registry.is_empty() {
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
        Ok(Worker {
            inner: Arc::new(Inner {
                store: self.db.store.clone(),
                config: self.db.config.clone(),
                registry,
                queues,
                workflows,
                id: format!("worker-{}", uuid::Uuid::new_v4()),
                concurrency: self.concurrency,
                poll_interval: self.poll_interval,
                stall_threshold_ms: i64::try_from(
                    self.stall_threshold
                        .as_millis()
                        .min(u128::from(pgbus_core::MAX_DURATION_MS)),
                )
                .unwrap_or(i64::MAX),
                shutdown_grace: self.shutdown_grace,
                notifications: self.notifications,
                error_hook: self.error_hook,
                stall_action: self.stall_action,
                heartbeat_interval: self.heartbeat_interval,
                lost_worker_ms: i64::try_from(self.lost_worker_threshold.as_millis())
                    .unwrap_or(i64::MAX),
                sweep_interval: self.sweep_interval,
                registered: AtomicBool::new(false),
            }),
        })
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
    config: tokio_postgres::Config,
    registry: HashMap<&'static str, Arc<dyn ErasedWorkflow>>,
    queues: Vec<String>,
    workflows: Vec<String>,
    id: String,
    concurrency: usize,
    poll_interval: Duration,
    stall_threshold_ms: i64,
    shutdown_grace: Duration,
    notifications: bool,
    error_hook: Option<ErrorHook>,
    stall_action: StallAction,
    heartbeat_interval: Duration,
    lost_worker_ms: i64,
    sweep_interval: Duration,
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
        info!(pgbus.worker = %inner.id, pgbus.queues = ?inner.queues, "worker started");
        if let Err(error) = self.ensure_registered().await {
            // The first claim tries again; claims fail until the row exists.
            warn!(pgbus.worker = %inner.id, error = %display_chain(&error), "could not record the worker row yet");
        }

        let wake = Arc::new(Notify::new());
        let stop_listening = Arc::new(AtomicBool::new(false));
        let listener = inner.notifications.then(|| {
            tokio::spawn(listen(
                inner.config.clone(),
                inner.store.schema.channel(),
                Arc::clone(&wake),
                Arc::clone(&stop_listening),
            ))
        });

        let upkeep = tokio::spawn(self.clone().upkeep());

        let slots = Arc::new(Semaphore::new(inner.concurrency));
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
                        for claim in claimed {
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                                break;
                            };
                            let worker = self.clone();
                            tasks.spawn(async move {
                                worker.run_claim(claim).await;
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

        info!(pgbus.worker = %inner.id, running = tasks.len(), "worker stopping");
        stop_listening.store(true, Ordering::Relaxed);
        if let Some(listener) = listener {
            listener.abort();
        }
        upkeep.abort();
        let drained = tokio::time::timeout(inner.shutdown_grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                pgbus.worker = %inner.id,
                abandoned = tasks.len(),
                "shutdown grace ran out; abandoning running bodies to the sweep"
            );
            tasks.abort_all();
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
                        && let Err(error) = inner.store.heartbeat(&inner.id).await
                    {
                        debug!(error = %display_chain(&error), "heartbeat failed");
                    }
                }
                _ = sweep.tick() => {
                    match self.sweep().await {
                        Ok(report) if report.repaired > 0 => {
                            warn!(repaired = report.repaired, "sweep repaired stalled attempts");
                        }
                        Ok(_) => {}
                        Err(error) => debug!(error = %display_chain(&error), "sweep failed"),
                    }
                }
            }
        }
    }

    /// Repairs stalled attempts once: each in-progress attempt past its stall
    /// horizon (detection `timeout`) or held by a worker whose heartbeat is older
    /// than the lost-worker threshold (detection `worker_lost`) ends with a
    /// [`StepStalled`](crate::StepStalled) error, the stall action and a
    /// `stall_detected` event. Fenced: an attempt that ended meanwhile is left
    /// alone. Safe to run from many workers at once; runs inside `run_until` on
    /// the sweep interval.
    ///
    /// # Errors
    /// Database errors.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        let inner = &self.inner;
        let mut report = SweepReport::default();
        for (claim, worker_id, detection) in inner.store.stalled(inner.lost_worker_ms, 100).await? {
            let error = crate::StepError::from(crate::StepStalled {
                detection: detection.clone(),
                step: claim.step_name.clone(),
                attempt: claim.attempt,
            });
            let reason = error.message();
            let registered = inner.registry.get(claim.workflow.as_str());
            let (definition, verb) = match (registered, inner.stall_action) {
                (_, StallAction::Cancel) => (
                    registered.map_or(&crate::__private::STAND_IN_DEFINITION, |w| w.definition()),
                    crate::engine::Verb::Cancel { reason },
                ),
                (Some(workflow), StallAction::Reattempt { wait }) => (
                    workflow.definition(),
                    crate::engine::Verb::Reattempt {
                        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    },
                ),
                (registered, _) => (
                    registered.map_or(&crate::__private::STAND_IN_DEFINITION, |w| w.definition()),
                    crate::engine::Verb::Pause { reason },
                ),
            };
            let result = AttemptResult {
                verb,
                error: Some(crate::engine::ErrorRecord::of(&error)),
                output: None,
                report: true,
                handler_error: None,
            };
            match inner
                .store
                .sweep_attempt(definition, &claim, &worker_id, &result, &detection)
                .await?
            {
                Ended::Applied(_) => {
                    report.repaired += 1;
                    metrics::counter!("pgbus_stalls_total", "detection" => detection.clone())
                        .increment(1);
                    if let Some(record) = &result.error {
                        self.report(&claim, &result, record, "stalled attempt repaired");
                    }
                }
                Ended::Late => report.left_alone += 1,
            }
        }
        Ok(report)
    }

    /// Claims what is due now (up to the concurrency) and runs it all to the end.
    /// Returns how many attempts ran. Meant for tests and scripts.
    ///
    /// # Errors
    /// Database errors from the claim.
    pub async fn run_once(&self) -> Result<usize, Error> {
        let claimed = self.claim(self.inner.concurrency).await?;
        let count = claimed.len();
        let mut tasks = JoinSet::new();
        for claim in claimed {
            let worker = self.clone();
            tasks.spawn(async move { worker.run_claim(claim).await });
        }
        while tasks.join_next().await.is_some() {}
        Ok(count)
    }

    /// Repeats [`Worker::run_once`] until nothing is due now. Returns how many
    /// attempts ran.
    ///
    /// # Errors
    /// Database errors from a claim.
    pub async fn run_until_idle(&self) -> Result<usize, Error> {
        let mut total = 0;
        loop {
            let ran = self.run_once().await?;
            if ran == 0 {
                return Ok(total);
            }
            total += ran;
        }
    }

    async fn claim(&self, limit: usize) -> Result<Vec<Claimed>, Error> {
        let inner = &self.inner;
        self.ensure_registered().await?;
        inner
            .store
            .claim(
                &inner.queues,
                &inner.workflows,
                i64::try_from(limit).unwrap_or(i64::MAX),
                &inner.id,
                inner.stall_threshold_ms,
            )
            .await
    }

    /// Runs one claimed attempt and records its outcome.
    async fn run_claim(&self, claim: Claimed) {
        let inner = &self.inner;
        let Some(workflow) = inner.registry.get(claim.workflow.as_str()) else {
            // Claims filter on registered workflows, so this cannot happen; leave
            // the row to the sweep rather than guess.
            error!(pgbus.workflow = %claim.workflow, "claimed a step of an unregistered workflow");
            return;
        };
        let span = info_span!(
            "pgbus.step",
            pgbus.workflow = %claim.workflow,
            pgbus.run_id = %claim.run_id,
            pgbus.step = %claim.step_name,
            pgbus.attempt = claim.attempt,
        );
        async {
            let pickup = (claim.started_at - claim.scheduled_at)
                .to_std()
                .unwrap_or_default();
            metrics::histogram!("pgbus_step_pickup_latency_seconds", "workflow" => claim.workflow.clone())
                .record(pickup.as_secs_f64());
            debug!("step started");
            let began = Instant::now();
            let result = workflow
                .attempt(AttemptInput {
                    run_id: claim.run_id,
                    step_name: claim.step_name.clone(),
                    attempt: claim.attempt,
                    reattempts: claim.reattempts,
                    input: claim.input.clone(),
                    outputs: claim.outputs.clone(),
                    timeout_ms: claim.timeout_ms,
                    unreadable: claim.unreadable.clone(),
                })
                .await;
            let ran = began.elapsed();
            self.finish(workflow.definition(), &claim, &result, ran).await;
        }
        .instrument(span)
        .await;
    }

    /// Records an attempt's outcome, retrying while the database is away; reports
    /// after commit.
    async fn finish(
        &self,
        definition: &'static crate::WorkflowDefinition,
        claim: &Claimed,
        result: &AttemptResult,
        ran: Duration,
    ) {
        let inner = &self.inner;
        let mut failures = Failures::default();
        let mut result = std::borrow::Cow::Borrowed(result);
        let ended = loop {
            match inner
                .store
                .end_attempt(definition, claim, &inner.id, &result)
                .await
            {
                Ok(ended) => break ended,
                Err(error) if error.is_transient() && failures.count < 5 => {
                    let pause = failures.failed(&error);
                    tokio::time::sleep(pause).await;
                }
                Err(error)
                    if !error.is_transient() && !matches!(result, std::borrow::Cow::Owned(_)) =>
                {
                    // The outcome itself cannot be stored (an output or text
                    // Postgres refuses): record the attempt as failed with that
                    // reason and no output, so the run pauses instead of hanging.
                    warn!(error = %display_chain(&error), "the step's outcome could not be stored; pausing the run");
                    result = std::borrow::Cow::Owned(unstorable(&error));
                }
                Err(error) => {
                    error!(
                        error = %display_chain(&error),
                        "could not record the step's outcome; the sweep will find the attempt"
                    );
                    return;
                }
            }
        };
        let result = result.as_ref();
        match ended {
            Ended::Late => {
                warn!(
                    "late completion ignored: the attempt was stalled, cancelled or claimed again"
                );
            }
            Ended::Applied(plan) => {
                metrics::histogram!(
                    "pgbus_step_duration_seconds",
                    "workflow" => claim.workflow.clone(),
                    "step" => claim.step_name.clone()
                )
                .record(ran.as_secs_f64());
                metrics::counter!(
                    "pgbus_steps_total",
                    "workflow" => claim.workflow.clone(),
                    "step" => claim.step_name.clone(),
                    "outcome" => plan.step_outcome.as_str()
                )
                .increment(1);
                info!(
                    pgbus.outcome = plan.step_outcome.as_str(),
                    pgbus.run_status = plan.run_status.as_str(),
                    elapsed_ms = u64::try_from(ran.as_millis()).unwrap_or(u64::MAX),
                    "step ended"
                );
                if let (true, Some(error)) = (result.report, &result.error) {
                    self.report(claim, result, error, "step failed");
                }
                if let Some(error) = &result.handler_error {
                    self.report(
                        claim,
                        result,
                        error,
                        "exception handler failed; the run is paused",
                    );
                }
            }
        }
    }

    /// A `tracing` error event and the error hook, after commit.
    fn report(
        &self,
        claim: &Claimed,
        result: &AttemptResult,
        error: &crate::engine::ErrorRecord,
        message: &str,
    ) {
        error!(
            error.class = %error.class,
            error.message = %error.message,
            pgbus.verb = ?result.verb,
            "{message}"
        );
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

/// What is recorded when an attempt's outcome cannot be stored as it is.
fn unstorable(error: &Error) -> AttemptResult {
    let error = crate::StepError::from(crate::error::Unstorable {
        reason: crate::error::display_chain(error),
    });
    AttemptResult {
        verb: crate::engine::Verb::Pause {
            reason: error.message(),
        },
        error: Some(crate::engine::ErrorRecord::of(&error)),
        output: None,
        report: true,
        handler_error: None,
    }
}

/// Consecutive database failures: logged once at `error`, then quietly, with a
/// growing pause, until a success.
#[derive(Default)]
struct Failures {
    count: u32,
}

impl Failures {
    fn failed(&mut self, error: &Error) -> Duration {
        self.count += 1;
        if self.count == 1 {
            error!(error = %display_chain(error), "database call failed; retrying with backoff");
        } else {
            debug!(error = %display_chain(error), failures = self.count, "database still failing");
        }
        let exponent = self.count.min(6);
        Duration::from_millis(100 * 2_u64.pow(exponent)).min(Duration::from_secs(5))
    }

    fn recovered(&mut self) {
        if self.count > 0 {
            info!(failures = self.count, "database answers again");
        }
        self.count = 0;
    }
}

/// Holds a `LISTEN` connection and turns notifications into wake-ups. Reconnects
/// with backoff; while it is down the worker still polls.
async fn listen(
    config: tokio_postgres::Config,
    channel: String,
    wake: Arc<Notify>,
    stop: Arc<AtomicBool>,
) {
    let mut failures = 0_u32;
    while !stop.load(Ordering::Relaxed) {
        match listen_once(&config, &channel, &wake).await {
            Ok(()) => {
                failures = 0;
                warn!("notification connection closed; polling until it is back");
            }
            Err(error) => {
                if failures == 0 {
                    warn!(error = %display_chain(&error), "notification connection failed; polling until it is back");
                }
                failures = failures.saturating_add(1);
            }
        }
        tokio::time::sleep(Duration::from_millis(
            200 * u64::from(failures.clamp(1, 25)),
        ))
        .await;
    }
}

/// One `LISTEN` session, until its connection ends.
async fn listen_once(
    config: &tokio_postgres::Config,
    channel: &str,
    wake: &Notify,
) -> Result<(), Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<()>();
    // The connection has to be driven for anything, LISTEN included, to happen.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => {
                    if sender.send(()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await?;
    debug!(channel, "listening for wake-ups");
    // Something may have become due while nobody listened.
    wake.notify_one();
    while received.recv().await.is_some() {
        wake.notify_one();
    }
    driver.abort();
    Ok(())
}

fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map_or_else(|| "unknown".to_owned(), |h| h.trim().to_owned())
}
