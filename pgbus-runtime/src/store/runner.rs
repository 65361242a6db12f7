//! The one step loop: claim, run an attempt, record its outcome, follow a
//! handoff. The worker and the testkit's `TestEnv` both drive their store
//! through it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tracing::{Instrument as _, debug, error, info, info_span, warn};

use super::{Claim, Claimer, Ended, Handoff, Registered, Store};
use crate::context::Limits;
use crate::definition::WorkflowDefinition;
use crate::engine::{AttemptResult, Plan, unstorable_result};
use crate::error::{Error, StepError, display_chain};
use crate::executor::{AttemptInput, Bound, ErasedWorkflow};
use crate::overrides::Overrides;
use crate::worker::Failures;
use crate::workflow::Workflow;

/// The log target of what the step loop and the sweep record: the worker's,
/// as before they moved here, so `RUST_LOG=pgbus_runtime::worker=debug` and
/// log readers that count by target keep working.
const WORKER_TARGET: &str = "pgbus_runtime::worker";

/// What a runner tells its owner about each attempt, and asks of it.
pub trait Observe: Send + Sync {
    /// Kept for as long as an attempt runs (the worker's entry on its running
    /// list, which its heartbeat reports); dropped when the attempt's outcome
    /// is recorded or given up.
    type Tracked: Send;

    /// An attempt is about to run: the claimed one, or one handed on.
    fn track(&self, claim: &Claim) -> Self::Tracked;

    /// An attempt ran and its outcome was recorded (or given up: `ended` is
    /// `None`).
    fn attempted(&self, attempted: &Attempted<'_>);
}

/// One attempt as it ended, for [`Observe::attempted`].
#[derive(Debug)]
pub struct Attempted<'a> {
    /// The claim it ran under.
    pub claim: &'a Claim,
    /// The workflow's definition.
    pub definition: &'static WorkflowDefinition,
    /// What was recorded: the attempt's result, or, when the store refused it
    /// as it was, the failure that paused the run instead
    /// ([`engine::unstorable_result`](crate::engine::unstorable_result)).
    pub result: &'a AttemptResult,
    /// How the store recorded it; `None` when it could not be recorded and the
    /// sweep will find the attempt.
    pub ended: Option<&'a Ended>,
    /// How long the body (with its guards and handlers) ran.
    pub ran: Duration,
    /// How many tries to record the outcome failed before it was recorded.
    pub store_failures: u32,
}

/// Asked for an injected fault of an attempt of (workflow, step), once its
/// guards let the body through (see
/// [`run_attempt_with_fault`](crate::executor::run_attempt_with_fault)).
pub type FaultHook = Arc<dyn Fn(&str, &str) -> Option<StepError> + Send + Sync>;

/// The step loop over a store `S`: its registered workflows, the id it claims
/// under, its queues and stall threshold, and the limits its attempts use.
pub struct Runner<S> {
    store: S,
    registry: HashMap<&'static str, Arc<dyn ErasedWorkflow>>,
    worker_id: String,
    /// The queues it claims from: those set with [`Runner::queues`], else
    /// every queue of what is registered (kept up to date on registration,
    /// not derived per attempt).
    queues: Vec<String>,
    queues_set: bool,
    /// What the registry holds, as claims filter on it (kept up to date on
    /// registration).
    registered: Registered,
    stall_threshold_ms: i64,
    limits: Limits,
    faults: Option<FaultHook>,
    /// The deployment's overrides ([`Runner::overrides`]): the registered
    /// workflows run under the definitions they derive, and the fan_out
    /// children this runner starts are placed with them.
    overrides: Overrides,
}

impl<S> std::fmt::Debug for Runner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("worker_id", &self.worker_id)
            .field("queues", &self.queues)
            .field("workflows", &self.registered.names())
            .finish_non_exhaustive()
    }
}

impl<S: Store> Runner<S> {
    /// A runner with nothing registered, claiming under `worker_id`, from the
    /// queues of what it registers (unless [`Runner::queues`] names them).
    pub fn new(store: S, worker_id: impl Into<String>) -> Self {
        Self {
            store,
            registry: HashMap::new(),
            worker_id: worker_id.into(),
            queues: Vec::new(),
            queues_set: false,
            registered: Registered::default(),
            stall_threshold_ms: crate::worker::capped_ms(crate::worker::DEFAULT_STALL_THRESHOLD),
            limits: Limits::default(),
            faults: None,
            overrides: Overrides::new(),
        }
    }

    /// Registers a workflow; a second of the same name replaces the first.
    /// Overrides given earlier ([`Runner::overrides`]) apply to it when they
    /// name it; when they do not fit it (a step it lacks), it runs as its
    /// source declares, and the refusal is logged (`error`):
    /// [`Runner::try_register`] returns it instead.
    #[must_use]
    pub fn register<W: Workflow>(self, workflow: W) -> Self {
        let bound: Arc<dyn ErasedWorkflow> = Arc::new(Bound::new(workflow));
        match self.overrides.apply(bound.declared()) {
            Ok(definition) => self.register_erased(bound.under(definition)),
            Err(refused) => {
                error!(target: WORKER_TARGET, { error = %refused }, "an override does not fit the workflow registered; it runs as its source declares");
                self.register_erased(bound)
            }
        }
    }

    /// [`Runner::register`], refusing a workflow the overrides given earlier
    /// do not fit.
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] as [`Overrides::apply`].
    pub fn try_register<W: Workflow>(self, workflow: W) -> Result<Self, Error> {
        let bound: Arc<dyn ErasedWorkflow> = Arc::new(Bound::new(workflow));
        let definition = self.overrides.apply(bound.declared())?;
        Ok(self.register_erased(bound.under(definition)))
    }

    /// Runs the registered workflows under the definitions `overrides` derive
    /// from their sources ([`Overrides::apply`]), replacing the overrides
    /// given before, and places the fan_out children its steps start with
    /// them. Workflows registered later get them too.
    ///
    /// Overrides of workflows not registered are kept, for the fan_out
    /// children this runner starts (a deployment gives one set of overrides
    /// to workers that register different workflows), and logged once here:
    /// `warn` for a name close to a registered one (a likely typo, with the
    /// name it may mean), else `info`.
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] for a value the macro would refuse (of
    /// any workflow), and for an override of a registered workflow that
    /// does not fit it, as [`Overrides::apply`] (a step it lacks or a
    /// gravestone, a `wait_timeout` on a step without `wait_for`). The
    /// runner is unchanged then.
    pub fn overrides(self, overrides: Overrides) -> Result<Self, Error> {
        let runner = self.bind_overrides(overrides)?;
        log_unregistered(&runner.overrides, &runner.registered_names());
        Ok(runner)
    }

    /// The names of the registered workflows.
    fn registered_names(&self) -> Vec<&'static str> {
        self.registry.keys().copied().collect()
    }

    /// [`Runner::overrides`] without the log of overrides of workflows not
    /// registered (the worker's build logs them itself, a sweeper not at all:
    /// it starts no children).
    pub(crate) fn bind_overrides(mut self, overrides: Overrides) -> Result<Self, Error> {
        // Every value, those of workflows not registered too: built in code,
        // they were not checked when read.
        overrides.check()?;
        let mut bound = Vec::with_capacity(self.registry.len());
        for workflow in self.registry.values() {
            bound.push(workflow.under(overrides.apply(workflow.declared())?));
        }
        self.overrides = overrides;
        Ok(bound.into_iter().fold(self, Self::register_erased))
    }

    /// The overrides the registered workflows run with (none unless
    /// [`Runner::overrides`] gave some).
    pub const fn overrides_in_force(&self) -> &Overrides {
        &self.overrides
    }

    pub(crate) fn register_erased(mut self, workflow: Arc<dyn ErasedWorkflow>) -> Self {
        let name = workflow.definition().name;
        self.registry.insert(name, workflow);
        self.registered = Registered::of(self.registry.values().map(|w| w.definition()));
        if !self.queues_set {
            self.queues = self.registered_queues();
        }
        self
    }

    /// Claims from `queues` only (default: every queue of what is registered).
    #[must_use]
    pub fn queues(mut self, queues: Vec<String>) -> Self {
        self.queues_set = !queues.is_empty();
        self.queues = if self.queues_set {
            queues
        } else {
            self.registered_queues()
        };
        self
    }

    /// The stall horizon of a claimed step without a timeout (default
    /// [`DEFAULT_STALL_THRESHOLD`](crate::worker::DEFAULT_STALL_THRESHOLD)).
    #[must_use]
    pub const fn stall_threshold_ms(mut self, ms: i64) -> Self {
        self.stall_threshold_ms = ms;
        self
    }

    /// The sizes a fan-out child's input may have.
    #[must_use]
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Asks `hook` for an injected fault of each attempt.
    #[must_use]
    pub fn faults(mut self, hook: FaultHook) -> Self {
        self.faults = Some(hook);
        self
    }

    /// The store.
    pub const fn store(&self) -> &S {
        &self.store
    }

    /// The id it claims under.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The queues it claims from: those set, else every queue a registered
    /// workflow's steps use, sorted.
    pub fn claimed_queues(&self) -> &[String] {
        &self.queues
    }

    /// Every queue a registered workflow's steps use, sorted.
    fn registered_queues(&self) -> Vec<String> {
        let mut queues: Vec<String> = self
            .registry
            .values()
            .flat_map(|w| {
                let definition = w.definition();
                std::iter::once(definition.queue)
                    .chain(definition.entries.iter().filter_map(|e| e.options.queue))
            })
            .map(str::to_owned)
            .collect();
        queues.sort();
        queues.dedup();
        queues
    }

    /// The names of the registered workflows, sorted.
    pub fn workflows(&self) -> &[String] {
        self.registered.names()
    }

    /// What the registered definitions hold, as claims filter on it.
    pub const fn registered(&self) -> &Registered {
        &self.registered
    }

    /// The registered definitions, by workflow name.
    pub fn definitions(&self) -> Vec<&'static WorkflowDefinition> {
        let mut definitions: Vec<_> = self.registry.values().map(|w| w.definition()).collect();
        definitions.sort_by_key(|d| d.name);
        definitions
    }

    /// The schedules the registered workflows declare in code
    /// (`#[workflow(schedule = "...")]`), each named after its workflow, with
    /// its input type's `Default` as input, by name.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] when a default input does not serialize or
    /// is over the limits (the expression and zone were checked at compile
    /// time, and are again here).
    pub fn declared_schedules(&self) -> Result<Vec<crate::schedule::ScheduleSpec>, Error> {
        crate::schedule::declared_specs(
            self.registry
                .values()
                .map(|workflow| (workflow.definition(), workflow.schedule())),
            &self.limits,
        )
    }

    /// The registered definition of `workflow`, if it is registered.
    pub fn definition(&self, workflow: &str) -> Option<&'static WorkflowDefinition> {
        self.registry.get(workflow).map(|w| w.definition())
    }

    /// Who this runner claims as, from `queues`.
    pub fn claimer<'a>(&'a self, queues: &'a [String]) -> Claimer<'a> {
        Claimer {
            worker_id: &self.worker_id,
            queues,
            registered: &self.registered,
            stall_threshold_ms: self.stall_threshold_ms,
        }
    }

    /// Claims up to `limit` due steps on `queues` of what the registered
    /// definitions hold.
    ///
    /// # Errors
    /// The store's.
    pub async fn claim(&self, queues: &[String], limit: usize) -> Result<Vec<Claim>, Error> {
        self.store.claim(&self.claimer(queues), limit).await
    }

    /// Runs `claim`'s attempt and records its outcome; then, while the
    /// outcome hands this runner the run's next step (up to `eager_steps` in a
    /// row, and only while `stopping` is not set), runs that one too. Returns
    /// how many attempts ran.
    pub async fn run_claim<O: Observe>(
        &self,
        claim: Claim,
        tracked: O::Tracked,
        observer: &O,
        eager_steps: usize,
        stopping: &AtomicBool,
    ) -> usize {
        let Some(workflow) = self.registry.get(claim.workflow.as_str()) else {
            // Claims filter on registered definitions, so this cannot happen;
            // leave the row to the sweep rather than guess.
            error!(target: WORKER_TARGET, { pgbus.workflow = %claim.workflow }, "claimed a step of an unregistered workflow");
            return 0;
        };
        let (mut claim, mut tracked) = (claim, tracked);
        let mut eager_left = eager_steps;
        let mut ran = 0;
        loop {
            let eager = (eager_left > 0).then_some(stopping);
            ran += 1;
            let Some(next) = self.run_attempt(&**workflow, &claim, observer, eager).await else {
                return ran;
            };
            // Tracked before the old entry is dropped: the row is committed
            // already, and a heartbeat between the two sees it as a suspect
            // only (orphans need two heartbeats).
            let next_tracked = observer.track(&next);
            drop(std::mem::replace(&mut tracked, next_tracked));
            claim = *next;
            eager_left -= 1;
        }
    }

    /// Runs `claim`'s attempt in its span and records the outcome; returns the
    /// next step when the outcome handed it on (only with `eager`, the
    /// owner's stopping flag, not set when the outcome is recorded).
    async fn run_attempt<O: Observe>(
        &self,
        workflow: &dyn ErasedWorkflow,
        claim: &Claim,
        observer: &O,
        eager: Option<&AtomicBool>,
    ) -> Option<Box<Claim>> {
        let span = info_span!(target: WORKER_TARGET, "pgbus.step", pgbus.workflow = %claim.workflow, pgbus.run_id = %claim.run_id, pgbus.step = %claim.step_name, pgbus.attempt = claim.attempt);
        async {
            let pickup = (claim.claimed_at - claim.scheduled_at)
                .to_std()
                .unwrap_or_default();
            metrics::histogram!(crate::metric::STEP_PICKUP_LATENCY, "workflow" => claim.workflow.clone())
                .record(pickup.as_secs_f64());
            debug!(target: WORKER_TARGET, "step started");
            let began = Instant::now();
            let fault: crate::executor::Fault = match &self.faults {
                Some(hook) => {
                    let hook = Arc::clone(hook);
                    let (workflow, step) = (claim.workflow.clone(), claim.step_name.clone());
                    Box::new(move || hook(&workflow, &step))
                }
                None => Box::new(|| None),
            };
            let input = AttemptInput {
                claim: claim.clone(),
                limits: self.limits,
            };
            let result = workflow.attempt(input, fault, &self.overrides).await;
            let ran = began.elapsed();
            self.finish(workflow.definition(), claim, result, ran, observer, eager)
                .await
        }
        .instrument(span)
        .await
    }

    /// Records an attempt's outcome and tells the observer.
    ///
    /// While the store is away (a restart, a terminated backend, a network
    /// error) it retries, from 50 ms doubling up to 1 s between tries, until
    /// the outcome is stored or the owner drops the task (a worker at the end
    /// of its shutdown grace). It does not give up sooner: the body has run,
    /// and an outcome never recorded would leave the attempt in progress under
    /// a live, heartbeating worker until its stall horizon, and then run the
    /// step again or pause the run. Retrying late is safe: if the sweep took
    /// the attempt meanwhile, the fence turns the retry into a late completion.
    async fn finish<O: Observe>(
        &self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        result: AttemptResult,
        ran: Duration,
        observer: &O,
        eager: Option<&AtomicBool>,
    ) -> Option<Box<Claim>> {
        let mut failures = Failures::with_pauses(Duration::from_millis(50), Duration::from_secs(1));
        let mut result = Cow::Owned::<AttemptResult>(result);
        let mut replaced = false;
        // Whether a try offered the handoff: decided when the outcome is
        // recorded, not when the body started, so an owner that began
        // stopping meanwhile takes no new step. Once offered, offered on every retry: the store hands on only in a
        // first try, and a retry puts back a step a try whose reply was lost
        // had handed on.
        let mut offered = false;
        let queues = self.claimed_queues();
        let ended = loop {
            offered |= eager.is_some_and(|stopping| !stopping.load(Ordering::Acquire));
            let handoff = offered.then_some(Handoff {
                queues,
                stall_threshold_ms: self.stall_threshold_ms,
            });
            match self
                .store
                .end_attempt(
                    definition,
                    claim,
                    &self.worker_id,
                    &result,
                    failures.count > 0,
                    handoff,
                )
                .await
            {
                Ok(ended) => break Some(ended),
                // An outage, or no connection to be had (a refused login
                // included): the outcome itself was never judged, so it waits.
                Err(error) if error.is_transient() || error.is_connection_failure() => {
                    if failures.record() {
                        warn!(target: WORKER_TARGET, { error = %display_chain(&error) }, "could not record the step's outcome yet; retrying until the database answers");
                    } else {
                        debug!(target: WORKER_TARGET, { error = %display_chain(&error), pgbus.failures = failures.count }, "still cannot record the step's outcome");
                    }
                    tokio::time::sleep(failures.pause()).await;
                }
                Err(error) if !replaced => {
                    // The outcome itself cannot be stored (an output or text
                    // the store refuses): record the attempt as failed with
                    // that reason and no output, so the run pauses instead of
                    // hanging.
                    warn!(target: WORKER_TARGET, { error = %display_chain(&error) }, "the step's outcome could not be stored; pausing the run");
                    result = Cow::Owned(unstorable_result(display_chain(&error)));
                    replaced = true;
                }
                Err(error) => {
                    error!(target: WORKER_TARGET, { error = %display_chain(&error) }, "could not record the step's outcome; the sweep will find the attempt");
                    break None;
                }
            }
        };
        if failures.count > 0 && ended.is_some() {
            info!(target: WORKER_TARGET, { pgbus.failures = failures.count }, "the database answers again; the step's outcome is settled");
        }
        log_ended(claim, ended.as_ref(), ran, failures.count);
        observer.attempted(&Attempted {
            claim,
            definition,
            result: &result,
            ended: ended.as_ref(),
            ran,
            store_failures: failures.count,
        });
        match ended {
            Some(Ended::Continued(_, next)) => Some(next),
            _ => None,
        }
    }
}

/// Logs the overrides of workflows not in `registered` (durable names),
/// once, when a worker or a runner takes them: each whose name is close to a
/// registered one is a likely typo (`warn`, with the name it may mean); the
/// others are kept for the fan_out children the runner starts (`info`).
pub(crate) fn log_unregistered(overrides: &Overrides, registered: &[&str]) {
    let mut others = Vec::new();
    for (workflow, close) in overrides.unregistered(registered) {
        match close {
            Some(close) => {
                warn!(target: WORKER_TARGET, { pgbus.workflow = workflow, pgbus.did_you_mean = close }, "an override names a workflow this worker does not register, close to one it does: a likely typo; it is kept for the fan_out children the worker starts");
            }
            None => others.push(workflow),
        }
    }
    if !others.is_empty() {
        info!(target: WORKER_TARGET, { pgbus.workflows = %others.join(", ") }, "overrides of workflows this worker does not register are kept for the fan_out children it starts");
    }
}

/// The metrics and log line of a recorded outcome.
fn log_ended(claim: &Claim, ended: Option<&Ended>, ran: Duration, store_failures: u32) {
    let elapsed_ms = u64::try_from(ran.as_millis()).unwrap_or(u64::MAX);
    match ended {
        None => {}
        Some(Ended::Late) if store_failures > 0 => {
            warn!(target: WORKER_TARGET, "late completion ignored: the attempt was stalled, cancelled or claimed again while the database was away, or a try whose reply was lost with the connection had recorded it");
        }
        Some(Ended::Late) => {
            warn!(target: WORKER_TARGET, "late completion ignored: the attempt was stalled, cancelled or claimed again");
        }
        Some(Ended::Parked(_)) => {
            metrics::histogram!(
                crate::metric::STEP_DURATION,
                "workflow" => claim.workflow.clone(),
                "step" => claim.step_name.clone()
            )
            .record(ran.as_secs_f64());
            metrics::counter!(
                crate::metric::STEPS_PARKED,
                "workflow" => claim.workflow.clone(),
                "step" => claim.step_name.clone()
            )
            .increment(1);
            debug!(target: WORKER_TARGET, { pgbus.elapsed_ms = elapsed_ms }, "step waiting");
        }
        Some(Ended::Applied(plan) | Ended::Continued(plan, _)) => applied(claim, plan, ran),
    }
}

/// The metrics and log line of an applied outcome.
fn applied(claim: &Claim, plan: &Plan, ran: Duration) {
    metrics::histogram!(
        crate::metric::STEP_DURATION,
        "workflow" => claim.workflow.clone(),
        "step" => claim.step_name.clone()
    )
    .record(ran.as_secs_f64());
    metrics::counter!(
        crate::metric::STEPS,
        "workflow" => claim.workflow.clone(),
        "step" => claim.step_name.clone(),
        "outcome" => plan.step_outcome.as_str()
    )
    .increment(1);
    debug!(target: WORKER_TARGET, { pgbus.outcome = plan.step_outcome.as_str(), pgbus.run_status = plan.run_status.as_str(), pgbus.elapsed_ms = u64::try_from(ran.as_millis()).unwrap_or(u64::MAX) }, "step ended");
}
