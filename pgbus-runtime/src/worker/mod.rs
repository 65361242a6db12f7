//! The worker: claims due steps of its registered workflows, runs up to N bodies at
//! once, applies their outcomes, and sleeps until woken by `NOTIFY`, the next due
//! time, or the poll interval.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Level, error, warn};

use crate::connection::Connector;
use crate::engine::{AttemptResult, StepOutcome};
use crate::store::{Claim, PgStore, Runner};

mod builder;
mod checks;
mod listener;
mod run_loop;
mod upkeep;

pub use builder::{Sweeper, WorkerBuilder};
pub(crate) use upkeep::Failures;

/// The target of the worker's log lines, whichever of its files logs them:
/// `RUST_LOG` filters and the chaos checks count by it.
const WORKER_TARGET: &str = "pgbus_runtime::worker";

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
    /// What the engine did about it, as [`Verb::stored`](crate::engine::Verb::stored)
    /// writes it, e.g. `Reattempt { wait_ms: 2000 }`.
    pub verb: String,
}

type ErrorHook = Arc<dyn Fn(&ErrorReport) + Send + Sync>;

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
/// How long a due row whose step no live worker's definition holds may wait
/// for one before the sweep pauses its run with `StepNotDefined`, by default
/// (see [`WorkerBuilder::undefined_step_grace`]): long enough for a rolling
/// deploy to bring up the workers that have the step.
pub const DEFAULT_UNDEFINED_STEP_GRACE: Duration = Duration::from_mins(5);

/// The longest worker name [`WorkerBuilder::name`] accepts, in characters.
pub const MAX_WORKER_NAME_CHARS: usize = 100;

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
    /// Due rows no live worker's definition holds, paused with
    /// `StepNotDefined` after the grace (see
    /// [`WorkerBuilder::undefined_step_grace`]).
    pub undefined_paused: usize,
    /// Runs past their deadline, cancelled or paused as their workflow's
    /// `on_deadline` says (see
    /// [`Store::expire_deadlines`](crate::store::Store::expire_deadlines)).
    pub deadlines_exceeded: usize,
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
            .field("name", &self.inner.name)
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
    /// Its stable name ([`WorkerBuilder::name`]; the id by default).
    name: String,
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
    /// The grace rule's grace, in ms (`None`: off).
    undefined_grace_ms: Option<i64>,
    /// The schedules it declares in code, written at registration.
    declared: Vec<crate::schedule::ScheduleSpec>,
    /// How often it fires due schedule ticks.
    schedule_interval: Duration,
    /// The queue limits it declares (`WorkerBuilder::queue_concurrency`),
    /// written at registration.
    queue_limits: Vec<(String, u32)>,
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

    /// Its stable name ([`WorkerBuilder::name`]; the id by default).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The queues it claims from.
    #[must_use]
    pub fn queues(&self) -> &[String] {
        &self.inner.queues
    }

    /// The definitions it runs and the queues it claims from, as the
    /// document `pgbus deploy-check` reads (write it with
    /// [`Definitions::to_json`](crate::deploy::Definitions::to_json)). The
    /// same as [`Definitions::of`](crate::deploy::Definitions::of) of its
    /// workflows' definitions, with its queues.
    #[must_use]
    pub fn definitions(&self) -> crate::deploy::Definitions {
        crate::deploy::Definitions::of(self.inner.runner.definitions())
            .with_queues(self.inner.queues.iter().cloned())
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
                verb: result.verb.stored(),
            });
        }
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
