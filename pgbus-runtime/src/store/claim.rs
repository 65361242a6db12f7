//! The claim: the one shape in which a store hands an attempt to the executor.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::RunId;
use crate::engine::{BatchState, StoredSignal};

use super::Registered;

/// A step attempt a store handed to a worker: the row, what its body reads, and
/// what its gate reads. Built by [`Store::claim`](super::Store::claim), by a
/// handoff ([`engine::continued_claim`](crate::engine::continued_claim)), and
/// for the sweep (without input or outputs).
#[derive(Debug, Clone)]
pub struct Claim {
    /// The step row.
    pub step_id: i64,
    /// The run.
    pub run_id: RunId,
    /// The workflow's name.
    pub workflow: String,
    /// The durable step name of the row.
    pub step_name: String,
    /// The attempt number, from 1.
    pub attempt: i32,
    /// Consecutive reattempts of this step before this attempt.
    pub reattempts: i32,
    /// When the row was due, on the store's clock.
    pub scheduled_at: DateTime<Utc>,
    /// When it was claimed, on the store's clock: the gate decides a timeout
    /// by this time, never a worker's clock.
    pub claimed_at: DateTime<Utc>,
    /// The step's timeout in milliseconds, if it has one.
    pub timeout_ms: Option<i64>,
    /// The run's input as stored.
    pub input: Value,
    /// Why the stored input, outputs or signals could not be read back, if
    /// they could not: the attempt then fails with an
    /// [`Unstorable`](crate::error::Unstorable) error for the policies.
    pub unreadable: Option<String>,
    /// Outputs of the run's completed or skipped steps, by durable name.
    pub outputs: BTreeMap<String, Value>,
    /// When the row first parked (`None` if it never did): its `wait_timeout`
    /// counts from here.
    pub waiting_since: Option<DateTime<Utc>>,
    /// For a `wait_for` step: the run's signals of the name it waits for that
    /// are not consumed, or were consumed by an earlier attempt of this step,
    /// in the order they were sent, at most a page.
    pub signals: Vec<StoredSignal>,
    /// For a fan_out step: the latest batch of any attempt of it.
    pub batch: Option<BatchState>,
    /// Whether this is a reattempt of an attempt whose wait timed out: it
    /// sees the timeout again, as a retried step sees the recorded result of a
    /// wait that timed out in DBOS and Temporal.
    pub timed_out_before: bool,
    /// The schedule tick the run was started for (`runs.schedule_name`,
    /// `runs.tick_at`); `None` for a run started otherwise. Handed to the
    /// body's [`StepCx::tick`](crate::StepCx::tick).
    pub tick: Option<crate::schedule::Tick>,
    /// Cancelled when the attempt loses its claim while it runs (a heartbeat
    /// finds it lost, the sweep takes it); handed to the body's
    /// [`StepCx`](crate::StepCx).
    pub cancellation: CancellationToken,
}

impl Claim {
    /// A claim of attempt `attempt` of `step_name` with nothing else known: no
    /// input, outputs, signals or batch; scheduled and claimed `at`. The
    /// stores fill in what they hold; tests of single steps use it as it is.
    #[must_use]
    pub fn new(
        run_id: RunId,
        workflow: impl Into<String>,
        step_name: impl Into<String>,
        attempt: i32,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            step_id: 0,
            run_id,
            workflow: workflow.into(),
            step_name: step_name.into(),
            attempt,
            reattempts: 0,
            scheduled_at: at,
            claimed_at: at,
            timeout_ms: None,
            input: Value::Null,
            unreadable: None,
            outputs: BTreeMap::new(),
            waiting_since: None,
            signals: Vec::new(),
            batch: None,
            timed_out_before: false,
            tick: None,
            cancellation: CancellationToken::new(),
        }
    }
}

/// Who claims, and what it may take.
#[derive(Debug, Clone, Copy)]
pub struct Claimer<'a> {
    /// Written on the claimed rows; the fence of every outcome.
    pub worker_id: &'a str,
    /// The queues it takes steps from.
    pub queues: &'a [String],
    /// What it can run: it takes a row only when its own definition of the
    /// row's workflow holds the row's step (a gravestone included). A row of
    /// a step it lacks, or of a workflow it did not register, waits for a
    /// worker that has it, and does not keep it from the rows behind it.
    /// When the run's `definition_digest` differs from this worker's digest
    /// of the workflow, the claim records a `definition_changed` event
    /// (details `{"old_digest", "new_digest"}`) before `step_started`, and
    /// the run takes this worker's digest.
    pub registered: &'a Registered,
    /// The stall horizon of a claimed step without a timeout, in milliseconds.
    pub stall_threshold_ms: i64,
}

/// What lets an outcome claim the run's next step for the worker that ran the
/// attempt, in the outcome's own transition, when that step is due at once:
/// the worker then runs it in the same slot without a claim of its own (one
/// commit per step instead of two, and no pickup wait). Whether a plan's next
/// step may be handed on is the engine's decision
/// ([`engine::hands_off`](crate::engine::hands_off)); the store writes it
/// `in_progress` with the worker's id, stall horizon and a `step_started`
/// event, exactly as a claim writes it, so a worker that dies meanwhile leaves
/// it to the sweep like any claim. Offered on a retried outcome too: a retry
/// hands nothing on, and if it finds its outcome recorded by a try whose reply
/// was lost, it puts back in the queue the step that try handed on, which
/// nothing would otherwise run. As with a claim, a step is handed on only
/// when the worker's own definition (the one the outcome is ended with) holds
/// it.
#[derive(Debug, Clone, Copy)]
pub struct Handoff<'a> {
    /// The queues of the worker: the next step must be on one.
    pub queues: &'a [String],
    /// The stall horizon of the handed-on step without a timeout, in ms.
    pub stall_threshold_ms: i64,
}

/// An attempt the sweep should repair.
#[derive(Debug, Clone)]
pub struct Stalled {
    /// The attempt, without input or outputs (the sweep needs none).
    pub claim: Claim,
    /// The worker that holds it, as written on the row.
    pub worker_id: String,
    /// `timeout` (past its stall horizon) or `worker_lost`.
    pub detection: String,
}
