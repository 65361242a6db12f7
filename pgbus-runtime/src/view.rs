//! What a client reads back: runs, their step attempts and their events.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::context::RunId;
use crate::engine::{BatchStatus, EventKind, RunStatus, StepOutcome, StepStatus};

mod held;
mod limits;
mod operator;
mod result;
mod unrunnable;
mod waiting;

pub use held::HeldBack;
pub use limits::{ConcurrencyNow, KeyNow, LimitsNow, RateNow};
pub use operator::{MinuteCounts, Overview, QueueNow, ReplicaLag, RunCount, WorkflowNow};
pub use result::{LastAttempt, REASON_EVENTS_READ, ResultView};
pub use unrunnable::{Missing, Unrunnable};
pub use waiting::WaitingFor;

/// How old a worker's heartbeat may be for a read to count the worker as
/// live, unless the read says otherwise ([`RunRead::lost_worker_threshold`],
/// [`RunFilter::lost_worker_threshold`]): the workers' own default
/// lost-worker threshold, 30 s.
pub const DEFAULT_LOST_WORKER_THRESHOLD: std::time::Duration = std::time::Duration::from_secs(30);

/// A run with its step attempts and events, oldest first: the latest of
/// each as a [`RunRead`] bounds them ([`RunView::counts`] says how many
/// there are in all, [`RunView::omitted`] which values were too large).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    /// The run row.
    pub run: RunSummary,
    /// The definition digest the run started with.
    pub definition_digest: String,
    /// The options digest the run started with.
    pub options_digest: String,
    /// The live steps of the definition the run started with, in order,
    /// and where each goes: the list it advances along, whichever version
    /// drives it (`None` for a run from before it was recorded). What a
    /// pre-deploy check judges it by.
    pub step_plan: Option<Vec<crate::engine::PlannedStep>>,
    /// The run's input.
    pub input: Value,
    /// The idempotency key it was started with.
    pub idempotency_key: Option<String>,
    /// Its concurrency key (given at start, else derived from the input by
    /// the workflow's `key` method), if it has one.
    pub concurrency_key: Option<String>,
    /// When it is cancelled or paused if not ended, if it has a deadline.
    pub deadline_at: Option<DateTime<Utc>>,
    /// Error class of the step error the run paused on.
    pub error_class: Option<String>,
    /// Error message of the step error the run paused on.
    pub error_message: Option<String>,
    /// When it last paused.
    pub paused_at: Option<DateTime<Utc>>,
    /// When it was cancelled.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// Its latest step attempts (at most [`RunRead::last`]), in the order
    /// they were scheduled.
    pub steps: Vec<StepView>,
    /// Its latest events (at most [`RunRead::last`]) and, older than those,
    /// the ones the timeline of the attempts kept needs (see [`RunRead`]),
    /// in order.
    pub events: Vec<EventView>,
    /// For a fan_out child: the batch it counts toward (`batches.id`).
    pub parent_batch_id: Option<i64>,
    /// For a fan_out child: the run that started its batch (the run of the
    /// batch's parent step). The same as [`RunSummary::parent_run`].
    pub parent_run_id: Option<RunId>,
    /// For a fan_out child: the durable name of the step whose batch it
    /// counts toward (the batch's parent step).
    pub parent_step: Option<String>,
    /// Its latest signals (at most [`RunRead::last`]), in the order they
    /// were sent, consumed or not.
    pub signals: Vec<SignalView>,
    /// Its latest fan_out batches (at most [`RunRead::last`]), in order.
    pub batches: Vec<BatchView>,
    /// How many attempts, events, signals and batches the run has in all.
    pub counts: RunCounts,
    /// The values left out for being longer than [`RunRead::value_bytes`]
    /// (as JSON text the way the database writes it, with a space after
    /// each `:` and `,`):
    /// each reads as JSON `null` in its place.
    pub omitted: Vec<Omitted>,
    /// When the run is `ready` and its due step is one no live worker can
    /// run: which row, what is missing (the workflow, the step in every
    /// live worker's definition of it, or a claim of the row's queue by a
    /// live worker that has the step) and since when it has been due
    /// (see [`Unrunnable`]). Live: a heartbeat within
    /// [`RunRead::lost_worker_threshold`].
    pub unrunnable: Option<Unrunnable>,
}

/// How much of a run [`Client::run_with`](crate::Client::run_with) reads:
/// the latest `last` attempts, events, signals and batches, and each value
/// (the input, an output, a signal payload) whole or, past `value_bytes` of
/// JSON text, not at all. A run can grow without bound (a step reattempted
/// for weeks, a signal a second), so every read of one is bounded in rows;
/// values are bounded where they are written (1 MiB inputs, 256 KiB
/// payloads) but a page of them is not small.
///
/// The events are the latest `last`, and beside them the older ones the
/// timeline of the kept attempts needs: each kept attempt's first
/// `step_started` and its latest [`RunRead::MARKS_PER_ATTEMPT`] (8)
/// `step_started` and `step_waiting` events (an attempt parked more often
/// than that draws its earlier parks as time ran), and the run's latest
/// `2 × last + 1` `paused`, `resumed`, `cancelled` and `finished` events
/// (the latest `last` paused periods and the run's end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRead {
    /// How many of the latest attempts, events, signals and batches to read
    /// (at least 1).
    pub last: usize,
    /// The most JSON text, in bytes, a value may have to be read; `None`
    /// reads every value whole.
    pub value_bytes: Option<usize>,
    /// How old a worker's heartbeat may be for the worker to count as live
    /// when the read decides [`RunView::unrunnable`] (default
    /// [`DEFAULT_LOST_WORKER_THRESHOLD`], 30 s: give the workers' own
    /// `WorkerBuilder::lost_worker_threshold` when it differs).
    pub lost_worker_threshold: std::time::Duration,
}

impl RunRead {
    /// [`Client::run`](crate::Client::run)'s bound: the latest 1,000 of each.
    pub const DEFAULT_LAST: usize = 1_000;

    /// The most a read keeps of each part: a larger `last` reads this many.
    pub const MAX_LAST: usize = 1_000_000;

    /// How many of its latest starts and parks each kept attempt keeps,
    /// beside its first start.
    pub const MARKS_PER_ATTEMPT: usize = 8;

    /// The latest `last` of each (1 to [`RunRead::MAX_LAST`]), values whole.
    #[must_use]
    pub fn latest(last: usize) -> Self {
        Self {
            last: last.clamp(1, Self::MAX_LAST),
            value_bytes: None,
            lost_worker_threshold: DEFAULT_LOST_WORKER_THRESHOLD,
        }
    }

    /// Workers whose heartbeat is older than `threshold` do not count as
    /// live for [`RunView::unrunnable`] (at most `36500d`, like every
    /// duration setting).
    #[must_use]
    pub const fn lost_worker_threshold(mut self, threshold: std::time::Duration) -> Self {
        self.lost_worker_threshold = threshold;
        self
    }

    /// [`RunRead::lost_worker_threshold`] in milliseconds, as the stores
    /// compare it.
    #[must_use]
    pub fn lost_ms(&self) -> i64 {
        crate::worker::capped_ms(self.lost_worker_threshold)
    }

    /// How many of each part this read keeps: `last` within 1 and
    /// [`RunRead::MAX_LAST`].
    #[must_use]
    pub fn kept(&self) -> usize {
        self.last.clamp(1, Self::MAX_LAST)
    }

    /// How many of the run's `paused`, `resumed`, `cancelled` and
    /// `finished` events this read keeps: the latest `kept` paused periods
    /// and the run's end.
    #[must_use]
    pub fn pause_marks(&self) -> usize {
        2 * self.kept() + 1
    }

    /// Values longer than `bytes` of JSON text are left out
    /// ([`RunView::omitted`] names them).
    #[must_use]
    pub fn value_bytes(mut self, bytes: usize) -> Self {
        self.value_bytes = Some(bytes);
        self
    }

    /// Cuts a whole `view` to this read, as a database read of the same run
    /// would have returned it (the memory store reads this way).
    #[must_use]
    pub fn cut(&self, mut view: RunView) -> RunView {
        fn keep_last<T>(list: &mut Vec<T>, last: usize) {
            list.drain(..list.len().saturating_sub(last));
        }
        let last = self.kept();
        view.counts = RunCounts::of(&view);
        keep_last(&mut view.steps, last);
        keep_last(&mut view.signals, last);
        keep_last(&mut view.batches, last);
        let first_step = view.steps.first().map_or(i64::MAX, |s| s.id);
        let latest_from = view.events.len().saturating_sub(last);
        let mut ends = self.pause_marks();
        let mark_of = |event: &EventView| {
            event
                .step_id
                .filter(|&id| id >= first_step)
                .filter(|_| EventKind::parse(&event.event).is_some_and(EventKind::marks_an_attempt))
        };
        let mut keep = vec![false; view.events.len()];
        // Each kept attempt's first start.
        let mut started = std::collections::HashSet::new();
        for (i, event) in view.events.iter().enumerate() {
            if event.event == EventKind::StepStarted
                && mark_of(event).is_some_and(|id| started.insert(id))
            {
                keep[i] = true;
            }
        }
        // From the newest back, so each allowance keeps the latest.
        let mut marks: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
        for (i, event) in view.events.iter().enumerate().rev() {
            if i >= latest_from {
                keep[i] = true;
            }
            if let Some(step_id) = mark_of(event) {
                let seen = marks.entry(step_id).or_default();
                if *seen < Self::MARKS_PER_ATTEMPT {
                    *seen += 1;
                    keep[i] = true;
                }
            }
            if ends > 0 && EventKind::parse(&event.event).is_some_and(EventKind::bounds_a_pause) {
                ends -= 1;
                keep[i] = true;
            }
        }
        let mut keep = keep.into_iter();
        view.events.retain(|_| keep.next().unwrap_or(false));
        if let Some(most) = self.value_bytes {
            let mut omit = |value: &mut Value, what: ValueOf| {
                let bytes = json_text_len(value);
                if bytes > most {
                    *value = Value::Null;
                    view.omitted
                        .push(Omitted::new(what, i64::try_from(bytes).unwrap_or(i64::MAX)));
                }
            };
            omit(&mut view.input, ValueOf::Input);
            for step in &mut view.steps {
                if let Some(output) = &mut step.output {
                    omit(output, ValueOf::Output { step_id: step.id });
                }
            }
            for signal in &mut view.signals {
                omit(
                    &mut signal.payload,
                    ValueOf::Payload {
                        signal_id: signal.id,
                    },
                );
            }
        }
        view
    }
}

impl Default for RunRead {
    fn default() -> Self {
        Self::latest(Self::DEFAULT_LAST)
    }
}

/// The length of `value` as PostgreSQL writes `jsonb` as text: compact
/// JSON with a space after each `:` and `,` between members.
fn json_text_len(value: &Value) -> usize {
    fn separators(value: &Value) -> usize {
        match value {
            Value::Array(items) => {
                items.len().saturating_sub(1) + items.iter().map(separators).sum::<usize>()
            }
            Value::Object(members) => {
                members.len() * 2 - usize::from(!members.is_empty())
                    + members.values().map(separators).sum::<usize>()
            }
            _ => 0,
        }
    }
    value.to_string().len() + separators(value)
}

/// How many of each part a run has in all, whatever a read kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunCounts {
    /// Step attempts.
    pub attempts: i64,
    /// Events.
    pub events: i64,
    /// Times it was paused (its `paused` events, each the start of a paused
    /// period).
    pub pauses: i64,
    /// Signals sent to it.
    pub signals: i64,
    /// `fan_out` batches.
    pub batches: i64,
}

impl RunCounts {
    pub(crate) fn new(attempts: i64, events: i64, pauses: i64, signals: i64, batches: i64) -> Self {
        Self {
            attempts,
            events,
            pauses,
            signals,
            batches,
        }
    }

    /// The lengths of a whole view's lists.
    fn of(view: &RunView) -> Self {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        Self {
            attempts: count(view.steps.len()),
            events: count(view.events.len()),
            pauses: count(
                view.events
                    .iter()
                    .filter(|e| e.event == EventKind::Paused)
                    .count(),
            ),
            signals: count(view.signals.len()),
            batches: count(view.batches.len()),
        }
    }
}

/// A value a read left out, and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Omitted {
    /// Which value.
    pub value: ValueOf,
    /// Its length as JSON text, in bytes.
    pub bytes: i64,
}

impl Omitted {
    pub(crate) fn new(value: ValueOf, bytes: i64) -> Self {
        Self { value, bytes }
    }
}

/// Where a value of a run lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "of")]
#[non_exhaustive]
pub enum ValueOf {
    /// The run's input.
    Input,
    /// An attempt's output.
    Output {
        /// The attempt (`steps.id`).
        step_id: i64,
    },
    /// A signal's payload.
    Payload {
        /// The signal.
        signal_id: crate::SignalId,
    },
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
    /// What no live worker has of its due step, when it is `ready` and no
    /// live worker can run that step (see [`Unrunnable`]; the view of one
    /// run says which row and since when).
    pub unrunnable: Option<Missing>,
    /// For a fan_out child: the run whose step started its batch (the
    /// batch's parent step's run); `None` for a top-level run.
    pub parent_run: Option<RunId>,
    /// How many child runs its fan_out batches hold in all (the sum of
    /// their totals; 0 for a run that never fanned out).
    pub children: i64,
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
    /// The concurrency limit holding this due row back, as its limit key
    /// (`workflow:<workflow>`, `key:<workflow>:<key>` or `queue:<queue>`):
    /// the row waits, out of the claim's way, until a slot of that key is
    /// given back. `None` when no limit holds it.
    pub held_by: Option<String>,
    /// The rate limit whose window this row waits for, as its rate key
    /// (`workflow:<workflow>`, `step:<workflow>/<step>` or
    /// `key:<workflow>:<key>`): `scheduled_at` is when the window lets it
    /// start. `None` when no rate holds it.
    pub throttled_by: Option<String>,
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
    /// Open, succeeded (all finished) or failed.
    pub status: BatchStatus,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When the last child ended (or the parent was cancelled).
    pub resolved_at: Option<DateTime<Utc>>,
    /// While the batch is open: a child run no live worker can run (its
    /// view says what is missing, see [`Unrunnable`]), the lowest id among
    /// the first [`BatchView::CHILDREN_CHECKED`] children the read looks
    /// at; `None` when none of those is stuck so, or the batch is resolved.
    pub unrunnable_child: Option<RunId>,
}

impl BatchView {
    /// How many of an open batch's children a read looks at for
    /// [`BatchView::unrunnable_child`] (which ones, past this many, is not
    /// specified): a batch may have any number of children, a read of its
    /// parent stays bounded.
    pub const CHILDREN_CHECKED: i64 = 1_000;
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
/// or set the fields of a `RunFilter::default()`. Every field narrows the
/// list; they combine with AND.
///
/// Pages: without [`RunFilter::before`] or [`RunFilter::after`] a list is
/// the newest runs; `before(id)` is the page older than `id`, `after(id)`
/// the page newer than `id` (the `limit` runs right after it). Every page
/// comes newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs of this workflow (its durable name, exactly).
    pub workflow: Option<String>,
    /// Only runs of workflows whose name starts with this text (compared
    /// byte for byte; no wildcards).
    pub workflow_prefix: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only top-level runs: those no fan_out batch started.
    pub top_level: bool,
    /// Only the children of this run: the runs its fan_out batches started.
    pub parent: Option<RunId>,
    /// Only the run started with this idempotency key (of any workflow: a
    /// key is unique per workflow, so at most one run per workflow).
    pub idempotency_key: Option<String>,
    /// Only runs whose input matches this SQL/JSON path (PostgreSQL's
    /// `input @? path`, e.g. `$.customer ? (@ == "c42")`). Inputs are not
    /// indexed, so the path is tried on at most [`RunFilter::INPUT_SCAN`]
    /// runs (those the other fields keep, from where the page starts): a
    /// page can come back short, or empty, while older matches exist; page
    /// on from the last run listed, or narrow by workflow or time. A path
    /// PostgreSQL does not read is [`Error::InvalidInputPath`](crate::Error::InvalidInputPath).
    pub input_path: Option<String>,
    /// Only runs older than this id (for paging back).
    pub before: Option<RunId>,
    /// Only runs newer than this id: the page right after it, returned
    /// newest first as every page is (for paging forward).
    pub after: Option<RunId>,
    /// Only runs created at or after this time.
    pub created_after: Option<DateTime<Utc>>,
    /// Only runs created before this time.
    pub created_before: Option<DateTime<Utc>>,
    /// At most this many (default 100, at most 1,000).
    pub limit: Option<u32>,
    /// How old a worker's heartbeat may be for the worker to count as live
    /// when the listing decides [`RunSummary::unrunnable`] (`None`:
    /// [`DEFAULT_LOST_WORKER_THRESHOLD`]).
    pub lost_worker_threshold: Option<std::time::Duration>,
}

impl RunFilter {
    /// How many runs a list with [`RunFilter::input_path`] tries the path
    /// on at most: 20,000.
    pub const INPUT_SCAN: i64 = 20_000;

    /// The page size when none is given.
    pub const DEFAULT_LIMIT: u32 = 100;

    /// The largest page.
    pub const MAX_LIMIT: u32 = 1_000;

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

    /// Only runs of workflows whose name starts with `prefix`.
    #[must_use]
    pub fn workflow_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.workflow_prefix = Some(prefix.into());
        self
    }

    /// Only runs in `status`.
    #[must_use]
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only top-level runs (no fan_out batch started them).
    #[must_use]
    pub fn top_level(mut self) -> Self {
        self.top_level = true;
        self
    }

    /// Only the child runs `run`'s fan_out batches started.
    #[must_use]
    pub fn parent(mut self, run: RunId) -> Self {
        self.parent = Some(run);
        self
    }

    /// Only the runs started with idempotency key `key`.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Only runs whose input matches the SQL/JSON path `path` (see
    /// [`RunFilter::input_path`] for how far it looks).
    #[must_use]
    pub fn input_path(mut self, path: impl Into<String>) -> Self {
        self.input_path = Some(path.into());
        self
    }

    /// Only runs older than `run` (its id), for the next page back.
    #[must_use]
    pub fn before(mut self, run: RunId) -> Self {
        self.before = Some(run);
        self
    }

    /// Only runs newer than `run` (its id): the page right after it.
    #[must_use]
    pub fn after(mut self, run: RunId) -> Self {
        self.after = Some(run);
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

    /// The page size this filter asks for: [`RunFilter::limit`] within 1
    /// and [`RunFilter::MAX_LIMIT`], else [`RunFilter::DEFAULT_LIMIT`].
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit
            .unwrap_or(Self::DEFAULT_LIMIT)
            .clamp(1, Self::MAX_LIMIT)
    }

    /// Workers whose heartbeat is older than `threshold` do not count as
    /// live for [`RunSummary::unrunnable`] (default 30 s).
    #[must_use]
    pub fn lost_worker_threshold(mut self, threshold: std::time::Duration) -> Self {
        self.lost_worker_threshold = Some(threshold);
        self
    }

    /// The lost-worker threshold in milliseconds, as the stores compare it.
    #[must_use]
    pub fn lost_ms(&self) -> i64 {
        crate::worker::capped_ms(
            self.lost_worker_threshold
                .unwrap_or(DEFAULT_LOST_WORKER_THRESHOLD),
        )
    }

    /// Whether `run` passes every field but the page bounds (`before`,
    /// `after`, `limit`) and [`RunFilter::input_path`]: the rule a store
    /// that filters in memory applies. `parent_run` is the run's
    /// [`RunSummary::parent_run`], `key` its idempotency key.
    #[must_use]
    pub fn keeps(&self, run: &RunSummary, key: Option<&str>) -> bool {
        self.workflow.as_ref().is_none_or(|w| *w == run.workflow)
            && self
                .workflow_prefix
                .as_ref()
                .is_none_or(|p| run.workflow.starts_with(p.as_str()))
            && self.status.is_none_or(|s| s == run.status)
            && (!self.top_level || run.parent_run.is_none())
            && self.parent.is_none_or(|p| run.parent_run == Some(p))
            && self
                .idempotency_key
                .as_deref()
                .is_none_or(|k| key == Some(k))
            && self.created_after.is_none_or(|at| run.created_at >= at)
            && self.created_before.is_none_or(|at| run.created_at < at)
    }
}
