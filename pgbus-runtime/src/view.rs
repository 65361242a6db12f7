//! What a client reads back: runs, their step attempts and their events.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::context::RunId;
use crate::engine::{RunStatus, StepOutcome, StepStatus};

/// A run with its step attempts and events, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    /// The run row.
    pub run: RunSummary,
    /// The definition digest the run started with.
    pub definition_digest: String,
    /// The options digest the run started with.
    pub options_digest: String,
    /// The run's input.
    pub input: Value,
    /// The idempotency key it was started with.
    pub idempotency_key: Option<String>,
    /// Error class of the step error the run paused on.
    pub error_class: Option<String>,
    /// Error message of the step error the run paused on.
    pub error_message: Option<String>,
    /// When it last paused.
    pub paused_at: Option<DateTime<Utc>>,
    /// When it was cancelled.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// Every step attempt, in the order they were scheduled.
    pub steps: Vec<StepView>,
    /// Every event, in order.
    pub events: Vec<EventView>,
    /// For a fan_out child: the batch it counts toward (`batches.id`).
    pub parent_batch_id: Option<i64>,
    /// Every signal sent to it, in order, consumed or not.
    pub signals: Vec<SignalView>,
    /// Its fan_out batches, in order.
    pub batches: Vec<BatchView>,
}

/// One run, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// Its id.
    pub id: RunId,
    /// The workflow's name.
    pub workflow: String,
    /// Its status.
    pub status: RunStatus,
    /// The step it is on (or ended on).
    pub current_step: Option<String>,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
}

/// One step attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepView {
    /// The row's id.
    pub id: i64,
    /// The durable step name.
    pub step_name: String,
    /// The attempt number, from 1.
    pub attempt: i32,
    /// Its status.
    pub status: StepStatus,
    /// What followed it, once it ended.
    pub outcome: Option<StepOutcome>,
    /// The queue it ran on.
    pub queue: String,
    /// Its priority.
    pub priority: i16,
    /// When it was due.
    pub scheduled_at: DateTime<Utc>,
    /// When a worker claimed it.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// When it counts as stalled.
    pub stall_at: Option<DateTime<Utc>>,
    /// The worker that claimed it.
    pub worker_id: Option<String>,
    /// Its output.
    pub output: Option<Value>,
    /// Its error's class.
    pub error_class: Option<String>,
    /// Its error's message.
    pub error_message: Option<String>,
    /// Its error's causes, nearest first.
    pub error_causes: Vec<String>,
    /// The signal a parked row waits for (`None` for a fan_out waiting on its
    /// batch, and for rows that never parked).
    pub waiting_for: Option<String>,
    /// When the row first parked: its `wait_timeout` counts from here.
    pub waiting_since: Option<DateTime<Utc>>,
    /// When the row was written (the previous step's outcome, or the run's
    /// start): `scheduled_at` minus this is the time it waited to be due.
    pub created_at: DateTime<Utc>,
}

impl StepView {
    /// Time from due to claimed: pickup latency.
    #[must_use]
    pub fn queued(&self) -> Option<chrono::Duration> {
        self.started_at.map(|started| started - self.scheduled_at)
    }

    /// Time from claimed to ended.
    #[must_use]
    pub fn ran(&self) -> Option<chrono::Duration> {
        self.started_at
            .zip(self.finished_at)
            .map(|(started, finished)| finished - started)
    }
}

/// A signal sent to a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalView {
    /// Its id.
    pub id: crate::SignalId,
    /// Its name.
    pub name: String,
    /// What the sender attached.
    pub payload: Value,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
    /// The step attempt (`steps.id`) that consumed it, if one did.
    pub consumed_by: Option<i64>,
    /// When that attempt's outcome was recorded.
    pub consumed_at: Option<DateTime<Utc>>,
}

/// A fan_out step's batch of child runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchView {
    /// Its id; the children's `parent_batch_id`.
    pub id: i64,
    /// The attempt (`steps.id`) that started it.
    pub parent_step_id: i64,
    /// Children in it.
    pub total: i32,
    /// Children that finished.
    pub finished: i32,
    /// Children that were cancelled (or are missing).
    pub cancelled: i32,
    /// `open`, `succeeded` (all finished) or `failed`.
    pub status: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When the last child ended (or the parent was cancelled).
    pub resolved_at: Option<DateTime<Utc>>,
}

/// One event of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventView {
    /// Its id; ids grow with time.
    pub id: i64,
    /// The step row it is about, if any.
    pub step_id: Option<i64>,
    /// The step's name, if about a step.
    pub step_name: Option<String>,
    /// The attempt, if about a step.
    pub attempt: Option<i32>,
    /// The event's name, e.g. `step_completed`.
    pub event: String,
    /// Who caused it: `client`, a worker id, or an operator.
    pub actor: String,
    /// Why, when a verb or an operator gave a reason.
    pub reason: Option<String>,
    /// Anything else worth keeping.
    pub details: Option<Value>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// Which runs to list: `RunFilter::new().workflow("orders.fulfil").limit(20)`,
/// or set the fields of a `RunFilter::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only runs older than this id (for paging back).
    pub before: Option<RunId>,
    /// Only runs created at or after this time.
    pub created_after: Option<DateTime<Utc>>,
    /// Only runs created before this time.
    pub created_before: Option<DateTime<Utc>>,
    /// At most this many (default 100, at most 1,000).
    pub limit: Option<u32>,
}

impl RunFilter {
    /// Every run, newest first, the default page of 100.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Only runs of the workflow named `name` (its durable name).
    #[must_use]
    pub fn workflow(mut self, name: impl Into<String>) -> Self {
        self.workflow = Some(name.into());
        self
    }

    /// Only runs in `status`.
    #[must_use]
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only runs older than `run` (its id), for the next page back.
    #[must_use]
    pub fn before(mut self, run: RunId) -> Self {
        self.before = Some(run);
        self
    }

    /// Only runs created at or after `at`.
    #[must_use]
    pub fn created_after(mut self, at: DateTime<Utc>) -> Self {
        self.created_after = Some(at);
        self
    }

    /// Only runs created before `at`.
    #[must_use]
    pub fn created_before(mut self, at: DateTime<Utc>) -> Self {
        self.created_before = Some(at);
        self
    }

    /// At most `limit` runs (clamped to 1 to 1,000; the default is 100).
    #[must_use]
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}
