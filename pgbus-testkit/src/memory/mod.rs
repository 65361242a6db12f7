//! The memory store: the Postgres store's rows as maps, changed by the same engine
//! plans, on a virtual clock.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use pgbus_runtime::context::CancellationToken;
use pgbus_runtime::engine::flow::{LimitTable, RateKey, SlotKey};
use pgbus_runtime::engine::{
    ErrorRecord, EventSpec, NewStep, PlannedStep, RunStatus, StepOutcome, StepStatus,
};
use pgbus_runtime::{
    BatchView, EventKind, EventView, Limits, RunId, RunSummary, SignalView, StepView,
    WorkflowDefinition,
};
use serde_json::Value;

mod act;
mod claim;
mod contract;
mod deadline;
mod flow;
mod operator;
mod outcome;
mod park;
pub(crate) mod path;
mod read;
mod result;
mod schedules;
mod signal;
mod start;
mod upkeep;

pub use contract::MemoryStore;

/// The actor the memory store writes on events a worker would write.
pub const TESTKIT_WORKER: &str = "testkit";

#[derive(Debug, Clone)]
struct Run {
    summary: RunSummary,
    definition_digest: String,
    options_digest: String,
    input: Value,
    idempotency_key: Option<String>,
    /// Its concurrency key (`runs.concurrency_key`).
    concurrency_key: Option<String>,
    /// The slots it holds while it runs, `slot = "run"` (`runs.slot_*`);
    /// none once it pauses or ends.
    slots: Vec<SlotKey>,
    error_class: Option<String>,
    error_message: Option<String>,
    paused_at: Option<DateTime<Utc>>,
    cancelled_at: Option<DateTime<Utc>>,
    step_names: Vec<String>,
    step_plan: Vec<PlannedStep>,
    /// The queue and priority it was started with.
    overrides: pgbus_runtime::engine::RunOverrides,
    parent_batch_id: Option<i64>,
    /// Its step rows' ids, oldest first.
    step_ids: Vec<i64>,
    /// Its events, in order.
    events: Vec<EventView>,
    /// Its signals, in order.
    signals: Vec<SignalView>,
    /// The schedule tick it was started for (`runs.schedule_name`, `tick_at`).
    tick: Option<pgbus_runtime::schedule::Tick>,
    /// Its deadline (`runs.deadline_at`), cleared once it fired.
    deadline_at: Option<DateTime<Utc>>,
    /// What it becomes past its deadline (`runs.on_deadline`).
    on_deadline: pgbus_runtime::DeadlineAction,
}

#[derive(Debug, Clone)]
struct Step {
    view: StepView,
    run_id: RunId,
    workflow: String,
    reattempts: i32,
    timeout_ms: Option<i64>,
    /// Parked with no end of its own: waiting for a signal without a
    /// `wait_timeout`, or for its batch. Its due time (36500 days on) only parks
    /// it again, so [`Rows::next_due`] leaves it out.
    open_ended: bool,
    /// The highest signal id its gate turned down (`steps.signals_seen_to`).
    signals_seen_to: Option<i64>,
    /// The slots it holds while `in_progress` (`steps.slot_*`), written by
    /// its claim.
    slots: Vec<SlotKey>,
    /// The concurrency limit holding it back (`steps.held_by`): out of the
    /// due index while set.
    held: Option<SlotKey>,
    /// The rate whose window it waits for (`steps.throttled_by`).
    throttled: Option<RateKey>,
}

impl Step {
    /// Holds the row back for `key` (`None`: lets it go), in the view too.
    fn set_held(&mut self, key: Option<SlotKey>) {
        self.view.held_by = key.as_ref().map(ToString::to_string);
        self.held = key;
    }

    /// Marks the row as waiting for `key`'s window (`None`: not), in the
    /// view too.
    fn set_throttled(&mut self, key: Option<RateKey>) {
        self.view.throttled_by = key.as_ref().map(ToString::to_string);
        self.throttled = key;
    }
}

/// Where a due row stands in the claim's order: (priority, due time, id).
type ClaimOrder = (i16, DateTime<Utc>, i64);

/// A fan_out batch row.
#[derive(Debug, Clone)]
struct BatchRow {
    run_id: RunId,
    view: BatchView,
}

/// The worker a crashed claim names, with a number ([`Rows::crash_next`]):
/// it stopped heartbeating at the claim.
pub(crate) const CRASHED_WORKER: &str = "crashed";

/// The run-level changes of an outcome or action plan.
struct Change<'a> {
    cancel_open_steps: bool,
    next: Option<&'a NewStep>,
    run_status: RunStatus,
    current_step: Option<&'a str>,
    run_error: Option<&'a ErrorRecord>,
    events: &'a [EventSpec],
}

/// Runs (each with its events and signals), step rows and batches in memory.
#[derive(Debug)]
pub(crate) struct Rows {
    pub(crate) now: DateTime<Utc>,
    runs: BTreeMap<i64, Run>,
    steps: BTreeMap<i64, Step>,
    /// The rows a claim may take (`scheduled` and `waiting`, not held), as
    /// (priority, due time, id): the order claims take them in.
    due: BTreeSet<ClaimOrder>,
    /// The limits in force (`flow_limits`, `rate_limits`), as workers
    /// registered them.
    flow: LimitTable,
    /// The runs holding a slot of each concurrency key, by a step in
    /// progress or as a run (`slot = "run"`), each with how many of those
    /// it holds it by: a key's slots held are its runs, each once.
    holders: BTreeMap<SlotKey, BTreeMap<i64, usize>>,
    /// The due rows held back, by the key holding them, as (priority, due
    /// time, id): the order a release wakes them in.
    held: BTreeMap<SlotKey, BTreeSet<ClaimOrder>>,
    /// The rows throttled, by the rate whose window they wait for, as (due
    /// time, id).
    throttled: BTreeMap<RateKey, BTreeSet<(DateTime<Utc>, i64)>>,
    /// Each rate's log: the start times of its last `count` starts, oldest
    /// first (`rate_windows`).
    windows: BTreeMap<RateKey, Vec<DateTime<Utc>>>,
    /// The run of the last event written, for [`Rows::set_details`].
    last_event: Option<RunId>,
    next_run: i64,
    next_step: i64,
    next_event: i64,
    /// Cancellation of the attempts in progress, by step id.
    tokens: BTreeMap<i64, CancellationToken>,
    /// Workers that died, with the time their heartbeat stopped.
    crashed: BTreeMap<String, DateTime<Utc>>,
    /// The registry: each registered worker's definitions, by worker id. A
    /// worker is live unless it died longer than the lost-worker threshold
    /// ago (see `crashed`).
    workers: BTreeMap<String, Vec<&'static WorkflowDefinition>>,
    /// The queues each registered worker claims from, by worker id (the
    /// `workers.queues` of Postgres).
    claims: BTreeMap<String, Vec<String>>,
    /// Every definition a worker registered, by options digest, kept when
    /// its workers are gone (`definitions` and `definition_starts`).
    definitions: BTreeMap<&'static str, &'static WorkflowDefinition>,
    next_signal: i64,
    batches: BTreeMap<i64, BatchRow>,
    next_batch: i64,
    /// The sizes of inputs and signal payloads accepted.
    pub(crate) limits: Limits,
    /// The `schedules` rows, by name.
    schedules: BTreeMap<String, pgbus_runtime::schedule::ScheduleView>,
}

impl Rows {
    pub(crate) fn new(now: DateTime<Utc>) -> Self {
        Self {
            now,
            runs: BTreeMap::new(),
            steps: BTreeMap::new(),
            due: BTreeSet::new(),
            flow: LimitTable::default(),
            holders: BTreeMap::new(),
            held: BTreeMap::new(),
            throttled: BTreeMap::new(),
            windows: BTreeMap::new(),
            last_event: None,
            next_run: 1,
            next_step: 1,
            next_event: 1,
            tokens: BTreeMap::new(),
            crashed: BTreeMap::new(),
            workers: BTreeMap::new(),
            claims: BTreeMap::new(),
            definitions: BTreeMap::new(),
            next_signal: 1,
            batches: BTreeMap::new(),
            next_batch: 1,
            limits: Limits::default(),
            schedules: BTreeMap::new(),
        }
    }

    /// Changes step row `id`, keeping the indexes in step with it (due,
    /// held and throttled rows, slots held): every change of a row goes
    /// through here, so a row that leaves `in_progress` gives its slots back
    /// and wakes the rows they held, whatever the path (an outcome, a park,
    /// the sweep, a cancel), as the Postgres store's row triggers do.
    fn update_step<R>(&mut self, id: i64, change: impl FnOnce(&mut Step) -> R) -> Option<R> {
        let step = self.steps.get_mut(&id)?;
        let before = flow::Placed::of(id, step);
        let status = step.view.status;
        let changed = change(step);
        if step.view.status != status {
            // A held or throttled row that changes status (claimed, woken by
            // a signal or its batch, cancelled, skipped) is neither any
            // more: back in the queue, the next claim decides on it again.
            step.set_held(None);
            step.set_throttled(None);
        }
        let after = flow::Placed::of(id, step);
        self.unplace(&before);
        self.place(&after);
        for key in before.slots.iter().filter(|key| !after.slots.contains(key)) {
            self.release(key);
        }
        Some(changed)
    }

    /// Sets the details of the last event written.
    fn set_details(&mut self, details: Option<Value>) {
        let last = self
            .last_event
            .and_then(|run| self.runs.get_mut(&run.0))
            .and_then(|run| run.events.last_mut());
        if let (Some(details), Some(event)) = (details, last) {
            event.details = Some(details);
        }
    }

    /// Cancels every open step row of a run, telling running bodies.
    fn cancel_open_steps(&mut self, run_id: RunId) {
        let now = self.now;
        for id in self.step_ids(run_id) {
            let open = self.steps.get(&id).is_some_and(|other| {
                matches!(
                    other.view.status,
                    StepStatus::Scheduled | StepStatus::InProgress | StepStatus::Waiting
                )
            });
            if !open {
                continue;
            }
            self.update_step(id, |other| {
                other.view.status = StepStatus::Cancelled;
                other.view.outcome = Some(StepOutcome::Cancelled);
                other.view.finished_at = Some(now);
            });
            if let Some(token) = self.tokens.remove(&id) {
                token.cancel();
            }
        }
    }

    /// The ids of a run's step rows, oldest first.
    fn step_ids(&self, run_id: RunId) -> Vec<i64> {
        self.runs
            .get(&run_id.0)
            .map(|run| run.step_ids.clone())
            .unwrap_or_default()
    }

    fn insert_step(&mut self, run_id: RunId, workflow: &str, new: &NewStep) {
        let id = self.next_step;
        self.next_step += 1;
        // A reattempt keeps the time the attempt before it first parked.
        let waiting_since = (new.reattempts > 0)
            .then(|| {
                self.step_ids(run_id)
                    .iter()
                    .filter_map(|id| self.steps.get(id))
                    .find(|step| {
                        step.view.step_name == new.step_name && step.view.attempt == new.attempt - 1
                    })
                    .and_then(|step| step.view.waiting_since)
            })
            .flatten();
        let delay = chrono::Duration::milliseconds(i64::try_from(new.delay_ms).unwrap_or(i64::MAX));
        self.steps.insert(
            id,
            Step {
                view: StepView {
                    id,
                    step_name: new.step_name.clone(),
                    attempt: new.attempt,
                    status: StepStatus::Scheduled,
                    outcome: None,
                    queue: new.queue.clone(),
                    priority: new.priority,
                    scheduled_at: self
                        .now
                        .checked_add_signed(delay)
                        .unwrap_or(DateTime::<Utc>::MAX_UTC),
                    started_at: None,
                    finished_at: None,
                    stall_at: None,
                    worker_id: None,
                    output: None,
                    error_class: None,
                    error_message: None,
                    error_causes: Vec::new(),
                    waiting_for: None,
                    waiting_since,
                    held_by: None,
                    throttled_by: None,
                    created_at: self.now,
                },
                run_id,
                workflow: workflow.to_owned(),
                reattempts: new.reattempts,
                timeout_ms: new.timeout_ms,
                open_ended: false,
                signals_seen_to: None,
                slots: Vec::new(),
                held: None,
                throttled: None,
            },
        );
        if let Some(placed) = self.steps.get(&id).map(|step| flow::Placed::of(id, step)) {
            self.place(&placed);
        }
        if let Some(run) = self.runs.get_mut(&run_id.0) {
            run.step_ids.push(id);
        }
    }

    fn event(
        &mut self,
        run_id: RunId,
        step: Option<&Step>,
        event: EventKind,
        actor: &str,
        reason: Option<String>,
    ) {
        let id = self.next_event;
        self.next_event += 1;
        let now = self.now;
        // An event of a run that is gone (retention) has nowhere to go.
        self.last_event = None;
        if let Some(run) = self.runs.get_mut(&run_id.0) {
            run.events.push(EventView {
                id,
                step_id: step.map(|s| s.view.id),
                step_name: step.map(|s| s.view.step_name.clone()),
                attempt: step.map(|s| s.view.attempt),
                event: event.as_str().to_owned(),
                actor: actor.to_owned(),
                reason,
                details: None,
                created_at: now,
            });
            self.last_event = Some(run_id);
        }
    }
}

/// Where a row stands in the due index: rows a claim may take (`scheduled`
/// and `waiting`, not held back) by priority, due time and id; others are
/// not in it.
fn due_key(id: i64, step: &Step) -> Option<ClaimOrder> {
    (is_open(step) && step.held.is_none()).then_some((
        step.view.priority,
        step.view.scheduled_at,
        id,
    ))
}

/// Whether a row is due or will be: `scheduled` or `waiting`.
fn is_open(step: &Step) -> bool {
    matches!(
        step.view.status,
        StepStatus::Scheduled | StepStatus::Waiting
    )
}
