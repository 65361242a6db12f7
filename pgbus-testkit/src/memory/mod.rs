//! The memory store: the Postgres store's rows as maps, changed by the same engine
//! plans, on a virtual clock.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use pgbus_runtime::context::CancellationToken;
use pgbus_runtime::engine::{
    Action, ActionRun, AttemptResult, AttemptState, BatchState, ErrorRecord, EventSpec, Gate,
    LatestStep, NewStep, Park, ParkWait, Plan, PlannedStep, RunState, RunStatus, StepOutcome,
    StepStatus, StoredSignal, carries_over, continued_claim, first_attempt, hands_off, plan_action,
    plan_outcome, plan_park, stall_event,
};
use pgbus_runtime::store::{Claim, Claimer, Ended, Handoff, Parked, Stalled};
use pgbus_runtime::{
    BatchView, ChildRun, Error, EventKind, EventView, Limits, RunCounts, RunFilter, RunId, RunRead,
    RunSummary, RunView, SignalId, SignalView, StepView, WorkflowDefinition,
};
use serde_json::Value;

mod contract;

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
    error_class: Option<String>,
    error_message: Option<String>,
    paused_at: Option<DateTime<Utc>>,
    cancelled_at: Option<DateTime<Utc>>,
    step_names: Vec<String>,
    step_plan: Vec<PlannedStep>,
    parent_batch_id: Option<i64>,
    /// Its step rows' ids, oldest first.
    step_ids: Vec<i64>,
    /// Its events, in order.
    events: Vec<EventView>,
    /// Its signals, in order.
    signals: Vec<SignalView>,
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
}

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
    /// The rows a claim may take (`scheduled` and `waiting`), as (priority,
    /// due time, id): the order claims take them in.
    due: BTreeSet<(i16, DateTime<Utc>, i64)>,
    /// The run of the last event written, for [`Rows::set_details`].
    last_event: Option<RunId>,
    next_run: i64,
    next_step: i64,
    next_event: i64,
    /// Cancellation of the attempts in progress, by step id.
    tokens: BTreeMap<i64, CancellationToken>,
    /// Workers that died, with the time their heartbeat stopped.
    crashed: BTreeMap<String, DateTime<Utc>>,
    next_signal: i64,
    batches: BTreeMap<i64, BatchRow>,
    next_batch: i64,
    /// The sizes of inputs and signal payloads accepted.
    pub(crate) limits: Limits,
}

impl Rows {
    pub(crate) fn new(now: DateTime<Utc>) -> Self {
        Self {
            now,
            runs: BTreeMap::new(),
            steps: BTreeMap::new(),
            due: BTreeSet::new(),
            last_event: None,
            next_run: 1,
            next_step: 1,
            next_event: 1,
            tokens: BTreeMap::new(),
            crashed: BTreeMap::new(),
            next_signal: 1,
            batches: BTreeMap::new(),
            next_batch: 1,
            limits: Limits::default(),
        }
    }

    /// As the Postgres store's `start_run`: `(run, created)`.
    pub(crate) fn start_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        input: Value,
        key: Option<&str>,
    ) -> Result<(RunId, bool), Error> {
        let Some((index, entry)) = definition.first_step() else {
            return Err(Error::NoSteps {
                workflow: definition.name.to_owned(),
            });
        };
        if let Some(key) = key
            && let Some(existing) = self.runs.values().find(|run| {
                run.summary.workflow == definition.name
                    && run.idempotency_key.as_deref() == Some(key)
            })
        {
            return Ok((existing.summary.id, false));
        }
        let id = self.create_run(definition, index, entry, input, key, None);
        self.event(id, None, EventKind::Started, "client", None);
        Ok((id, true))
    }

    /// A run row and its first step row, without the `started` event.
    fn create_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        index: usize,
        entry: &'static pgbus_runtime::Entry,
        input: Value,
        key: Option<&str>,
        parent_batch_id: Option<i64>,
    ) -> RunId {
        let id = RunId(self.next_run);
        self.next_run += 1;
        let first = first_attempt(definition, index, entry);
        self.runs.insert(
            id.0,
            Run {
                summary: RunSummary {
                    id,
                    workflow: definition.name.to_owned(),
                    status: RunStatus::Ready,
                    current_step: Some(first.step_name.clone()),
                    created_at: self.now,
                    updated_at: self.now,
                    finished_at: None,
                },
                definition_digest: definition.digest.to_owned(),
                options_digest: definition.options_digest.to_owned(),
                input,
                idempotency_key: key.map(str::to_owned),
                error_class: None,
                error_message: None,
                paused_at: None,
                cancelled_at: None,
                step_names: pgbus_runtime::engine::live_step_names(definition),
                step_plan: pgbus_runtime::engine::step_plan(definition),
                parent_batch_id,
                step_ids: Vec::new(),
                events: Vec::new(),
                signals: Vec::new(),
            },
        );
        self.insert_step(id, definition.name, &first);
        id
    }

    /// As `claim.sql`, one row: the due step a claim takes first, for
    /// `claimer`'s workflows and queues: lowest priority number, then earliest
    /// due, then oldest row; runs `ready`.
    pub(crate) fn claim(&mut self, claimer: &Claimer<'_>) -> Option<Claim> {
        let now = self.now;
        let worker = claimer.worker_id;
        let step_id = self.next_claimable(claimer.workflows, Some(claimer.queues))?;
        let step = self.update_step(step_id, |step| {
            step.view.status = StepStatus::InProgress;
            step.view.started_at = Some(now);
            step.view.worker_id = Some(worker.to_owned());
            let stall_ms = step.timeout_ms.unwrap_or(claimer.stall_threshold_ms);
            step.view.stall_at = now.checked_add_signed(chrono::Duration::milliseconds(stall_ms));
            step.clone()
        })?;
        let run = self.runs.get_mut(&step.run_id.0)?;
        run.summary.status = RunStatus::Performing;
        run.summary.updated_at = now;
        let input = run.input.clone();
        self.event(
            step.run_id,
            Some(&step),
            EventKind::StepStarted,
            worker,
            None,
        );
        let cancellation = CancellationToken::new();
        self.tokens.insert(step_id, cancellation.clone());
        let wait_for =
            step.view.waiting_for.clone().or_else(|| {
                run_plan_wait_for(self.runs.get(&step.run_id.0)?, &step.view.step_name)
            });
        let signals = wait_for
            .map(|name| self.gate_signals(&step, &name))
            .unwrap_or_default();
        // The latest batch of any attempt of the step, as claim.sql finds it.
        let batch = self
            .batches
            .values()
            .filter(|b| {
                b.run_id == step.run_id
                    && self
                        .steps
                        .get(&b.view.parent_step_id)
                        .is_some_and(|parent| parent.view.step_name == step.view.step_name)
            })
            .max_by_key(|b| b.view.id)
            .map(|b| BatchState {
                id: b.view.id,
                total: b.view.total,
                finished: b.view.finished,
                cancelled: b.view.cancelled,
                open: b.view.status == "open",
                own: b.view.parent_step_id == step_id,
                output: self
                    .steps
                    .get(&b.view.parent_step_id)
                    .and_then(|parent| parent.view.output.clone()),
            });
        let timed_out_before = step.reattempts > 0
            && self.runs.get(&step.run_id.0).is_some_and(|run| {
                run.events.iter().any(|e| {
                    e.event == EventKind::WaitTimedOut
                        && e.step_name.as_deref() == Some(step.view.step_name.as_str())
                        && e.attempt == Some(step.view.attempt - 1)
                })
            });
        Some(Claim {
            step_id,
            reattempts: step.reattempts,
            scheduled_at: step.view.scheduled_at,
            timeout_ms: step.timeout_ms,
            input,
            outputs: self.outputs(step.run_id),
            waiting_since: step.view.waiting_since,
            signals,
            batch,
            timed_out_before,
            cancellation,
            ..Claim::new(
                step.run_id,
                step.workflow.clone(),
                step.view.step_name.clone(),
                step.view.attempt,
                now,
            )
        })
    }

    /// The row a claim takes first: lowest priority number, then earliest due,
    /// then oldest, among the due rows of registered workflows whose run is
    /// `ready`.
    fn next_claimable(&self, registered: &[String], queues: Option<&[String]>) -> Option<i64> {
        let now = self.now;
        let mut from = (i16::MIN, DateTime::<Utc>::MIN_UTC, i64::MIN);
        loop {
            // One priority at a time, up to the rows not yet due.
            let mut priority = None;
            for &(p, at, id) in self.due.range(from..) {
                match priority {
                    None => priority = Some(p),
                    Some(current) if current != p => break,
                    Some(_) => {}
                }
                if at > now {
                    break;
                }
                let claimable = self.steps.get(&id).is_some_and(|step| {
                    registered.contains(&step.workflow)
                        && queues.is_none_or(|queues| queues.contains(&step.view.queue))
                        && self
                            .runs
                            .get(&step.run_id.0)
                            .is_some_and(|run| run.summary.status == RunStatus::Ready)
                });
                if claimable {
                    return Some(id);
                }
            }
            from = (
                priority?.checked_add(1)?,
                DateTime::<Utc>::MIN_UTC,
                i64::MIN,
            );
        }
    }

    /// Changes step row `id`, keeping the due index in step with it.
    fn update_step<R>(&mut self, id: i64, change: impl FnOnce(&mut Step) -> R) -> Option<R> {
        let step = self.steps.get_mut(&id)?;
        if let Some(key) = due_key(id, step) {
            self.due.remove(&key);
        }
        let changed = change(step);
        if let Some(key) = due_key(id, step) {
            self.due.insert(key);
        }
        Some(changed)
    }

    /// The run's signals named `name` that the gate of `step` may take, as
    /// claim.sql brings them: the one an attempt of the same step consumed,
    /// then at most a page of unconsumed ones above the row's
    /// `signals_seen_to`, oldest first.
    fn gate_signals(&self, step: &Step, name: &str) -> Vec<StoredSignal> {
        let Some(run) = self.runs.get(&step.run_id.0) else {
            return Vec::new();
        };
        let stored = |g: &SignalView, taken_before| StoredSignal {
            id: g.id,
            name: g.name.clone(),
            payload: g.payload.clone(),
            taken_before,
        };
        let named = run.signals.iter().filter(|g| g.name == name);
        let taken = named
            .clone()
            .find(|g| {
                g.consumed_by
                    .and_then(|by| self.steps.get(&by))
                    .is_some_and(|consumer| {
                        consumer.run_id == step.run_id
                            && consumer.view.step_name == step.view.step_name
                    })
            })
            .map(|g| stored(g, true));
        let seen_to = step.signals_seen_to.unwrap_or(0);
        taken
            .into_iter()
            .chain(
                named
                    .filter(|g| g.consumed_by.is_none() && g.id.0 > seen_to)
                    .take(pgbus_runtime::executor::SIGNAL_PAGE)
                    .map(|g| stored(g, false)),
            )
            .collect()
    }

    /// Claims the next due step for a worker that dies at once: the row stays in
    /// progress under a worker named after [`CRASHED_WORKER`], whose heartbeat
    /// stopped now. Returns the
    /// run, if a step was due.
    pub(crate) fn crash_next(&mut self, claimer: &Claimer<'_>) -> Option<RunId> {
        let worker = format!("{CRASHED_WORKER}-{}", self.crashed.len() + 1);
        let claim = self.claim(&Claimer {
            worker_id: &worker,
            ..*claimer
        })?;
        self.tokens.remove(&claim.step_id);
        let now = self.now;
        self.crashed.insert(worker, now);
        Some(claim.run_id)
    }

    /// When the next claimable step is due, if any: a scheduled row, or a
    /// waiting one at the end of its `wait_timeout`. A row parked with no end of
    /// its own (a signal without a timeout, a batch) is not counted: only a
    /// signal or its children wake it, and a clock jumped to its far due time
    /// would only park it again.
    pub(crate) fn next_due(&self, registered: &[String]) -> Option<DateTime<Utc>> {
        self.steps
            .values()
            .filter(|step| {
                (step.view.status == StepStatus::Scheduled
                    || (step.view.status == StepStatus::Waiting && !step.open_ended))
                    && registered.contains(&step.workflow)
                    && self
                        .runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
            })
            .map(|step| step.view.scheduled_at)
            .min()
    }

    /// As the Postgres store's `end_attempt`: ends an attempt fenced on
    /// `worker`'s claim; for the sweep (`detection` given) with a
    /// `stall_detected` event first, and no late-completion event when the
    /// fence fails.
    pub(crate) fn end_attempt(
        &mut self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        result: &AttemptResult,
        worker: &str,
        detection: Option<&str>,
    ) -> Ended {
        let now = self.now;
        let Some(run) = self.runs.get(&claim.run_id.0) else {
            // The run was deleted (retention) while the step ran.
            return Ended::Late;
        };
        let state = RunState {
            status: run.summary.status,
            step_names: Some(run.step_names.clone()),
            step_plan: Some(run.step_plan.clone()),
        };
        let mut plan = plan_outcome(
            definition,
            &state,
            &AttemptState {
                step_name: claim.step_name.clone(),
                attempt: claim.attempt,
                reattempts: claim.reattempts,
            },
            result,
        );
        if let Some(detection) = detection {
            plan.events.insert(0, stall_event(detection));
        }
        let actor = if detection.is_some() { "sweep" } else { worker };
        if let (Some(park), None) = (&result.park, detection) {
            return self
                .park(claim, result, park, worker, &state)
                .map_or(Ended::Late, Ended::Parked);
        }
        let fenced = self.steps.get_mut(&claim.step_id).filter(|step| {
            step.view.status == StepStatus::InProgress
                && step.view.attempt == claim.attempt
                && step.view.worker_id.as_deref() == Some(worker)
        });
        let Some(step) = fenced else {
            if detection.is_none() {
                self.late(claim, result);
            }
            return Ended::Late;
        };
        step.view.status = plan.step_status;
        step.view.outcome = Some(plan.step_outcome);
        if result.output.is_some() {
            // A fan_out attempt that recorded none keeps the output it parked with.
            step.view.output.clone_from(&result.output);
        }
        step.view.error_class = result.error.as_ref().map(|e| e.class.clone());
        step.view.error_message = result.error.as_ref().map(|e| e.message.clone());
        step.view.error_causes = result
            .error
            .as_ref()
            .map(|e| e.causes.clone())
            .unwrap_or_default();
        step.view.finished_at = Some(now);
        let step = step.clone();
        self.tokens.remove(&claim.step_id);
        if let Some(Gate::Signal { id, fresh: true }) = result.gate
            && let Some(signal) = self.runs.get_mut(&claim.run_id.0).and_then(|run| {
                run.signals
                    .iter_mut()
                    .find(|g| g.id == id && g.consumed_by.is_none())
            })
        {
            signal.consumed_by = Some(claim.step_id);
            signal.consumed_at = Some(now);
        }
        self.apply_change(
            claim.run_id,
            &claim.workflow,
            &Change {
                cancel_open_steps: plan.cancel_open_steps,
                next: plan.next.as_ref(),
                run_status: plan.run_status,
                current_step: plan.current_step.as_deref(),
                run_error: plan.run_error.as_ref(),
                events: &plan.events,
            },
            Some(&step),
            actor,
        );
        Ended::Applied(Box::new(plan))
    }

    /// As `insert_step.sql` with a worker id: when the engine lets `plan` hand
    /// its next step (just inserted, due now) to the worker that ran `claim`,
    /// that row is claimed for it in the same transition (`in_progress`, its
    /// stall horizon, a `step_started` event, the run `performing`), and the
    /// claim it runs comes back with the plan.
    pub(crate) fn hand_off(
        &mut self,
        claim: &Claim,
        result: &AttemptResult,
        worker: &str,
        plan: Box<Plan>,
        handoff: Handoff<'_>,
    ) -> Ended {
        let now = self.now;
        let Some(run) = self.runs.get(&claim.run_id.0) else {
            return Ended::Applied(plan);
        };
        let (Some(next), Some(&next_id)) = (plan.next.as_ref(), run.step_ids.last()) else {
            return Ended::Applied(plan);
        };
        if !hands_off(&plan, Some(&run.step_plan), handoff.queues) || !carries_over(claim, result) {
            return Ended::Applied(plan);
        }
        let kept_output = self
            .steps
            .get(&claim.step_id)
            .and_then(|step| step.view.output.clone());
        let stall_ms = next.timeout_ms.unwrap_or(handoff.stall_threshold_ms);
        let Some(step) = self.update_step(next_id, |step| {
            step.view.status = StepStatus::InProgress;
            step.view.started_at = Some(now);
            step.view.worker_id = Some(worker.to_owned());
            step.view.stall_at = now.checked_add_signed(chrono::Duration::milliseconds(stall_ms));
            step.clone()
        }) else {
            return Ended::Applied(plan);
        };
        if let Some(run) = self.runs.get_mut(&claim.run_id.0) {
            run.summary.status = RunStatus::Performing;
        }
        self.event(
            claim.run_id,
            Some(&step),
            EventKind::StepStarted,
            worker,
            None,
        );
        let continued = Claim {
            cancellation: CancellationToken::new(),
            ..continued_claim(claim, &plan, next, result, kept_output, next_id, now)
        };
        self.tokens.insert(next_id, continued.cancellation.clone());
        Ended::Continued(plan, Box::new(continued))
    }

    /// The run-level part of an outcome or action: open rows, the next row, the
    /// run row, the events.
    fn apply_change(
        &mut self,
        run_id: RunId,
        workflow: &str,
        change: &Change<'_>,
        step: Option<&Step>,
        actor: &str,
    ) {
        let now = self.now;
        if change.cancel_open_steps {
            self.cancel_open_steps(run_id);
        }
        if change.run_status == RunStatus::Cancelled {
            self.cancel_children(run_id, actor);
        }
        if let Some(next) = change.next {
            self.insert_step(run_id, workflow, next);
        }
        let parent_batch = self.runs.get(&run_id.0).and_then(|run| run.parent_batch_id);
        if let Some(run) = self.runs.get_mut(&run_id.0) {
            if change.run_status == RunStatus::Paused && run.summary.status != RunStatus::Paused {
                run.paused_at = Some(now);
            }
            if change.run_status == RunStatus::Cancelled {
                run.cancelled_at = Some(now);
            }
            if change.run_status == RunStatus::Finished {
                run.summary.finished_at = Some(now);
            }
            run.summary.status = change.run_status;
            run.summary.current_step = change.current_step.map(str::to_owned);
            run.summary.updated_at = now;
            run.error_class = change.run_error.map(|e| e.class.clone());
            run.error_message = change.run_error.map(|e| e.message.clone());
        }
        for event in change.events {
            let about = if event.about_step { step } else { None };
            self.event(run_id, about, event.event, actor, event.reason.clone());
            self.set_details(event.details.clone());
        }
        if change.run_status.is_terminal()
            && let Some(batch) = parent_batch
        {
            self.count_child(batch, change.run_status, actor);
        }
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

    /// As `park_step.sql` (and `start_children.sql` for a new batch): parks the
    /// claimed row as `waiting`, same attempt; `false` when the fence failed
    /// (a late completion, recorded as such), else how it parked.
    fn park(
        &mut self,
        claim: &Claim,
        result: &AttemptResult,
        park: &Park,
        worker: &str,
        state: &RunState,
    ) -> Option<Parked> {
        let now = self.now;
        let fenced = self.steps.get(&claim.step_id).is_some_and(|step| {
            step.view.status == StepStatus::InProgress
                && step.view.attempt == claim.attempt
                && step.view.worker_id.as_deref() == Some(worker)
        });
        if !fenced {
            self.late(claim, result);
            return None;
        }
        let plan = plan_park(state, park);
        let wait = park.wait();
        let (name, due_ms, from_first_park) = (wait.signal, wait.due_ms, wait.from_first_park);
        let seen_to = self
            .steps
            .get(&claim.step_id)
            .and_then(|step| step.signals_seen_to)
            .max(wait.turned_down_to.map(|id| id.0));
        let (woken, adopt) = self.wakes_at_park(claim.run_id, &wait, seen_to);
        if let Some(batch) = adopt
            .and_then(|id| self.batches.get_mut(&id))
            .filter(|b| b.view.status == "open")
        {
            batch.view.parent_step_id = claim.step_id;
        }
        let parked = self.update_step(claim.step_id, |step| {
            step.signals_seen_to = seen_to;
            let since = *step.view.waiting_since.get_or_insert(now);
            step.view.status = if woken {
                StepStatus::Scheduled
            } else {
                StepStatus::Waiting
            };
            step.view.waiting_for = name.map(str::to_owned);
            step.open_ended = !from_first_park;
            step.view.scheduled_at = if woken {
                now
            } else {
                add_ms(if from_first_park { since } else { now }, due_ms)
            };
            step.view.stall_at = None;
            if result.output.is_some() {
                step.view.output.clone_from(&result.output);
            }
            step.clone()
        });
        let step = parked?;
        self.tokens.remove(&claim.step_id);
        let mut events = plan.events;
        if let Park::Batch { children } = park {
            let (batch_id, total) = self.start_children(claim, children, worker);
            if let Some(event) = events.first_mut() {
                event.details = Some(serde_json::json!({ "batch_id": batch_id, "total": total }));
            }
        }
        self.apply_change(
            claim.run_id,
            &claim.workflow,
            &Change {
                cancel_open_steps: false,
                next: None,
                run_status: plan.run_status,
                current_step: Some(&claim.step_name),
                run_error: None,
                events: &events,
            },
            Some(&step),
            worker,
        );
        Some(Parked {
            woken,
            run_status: plan.run_status,
        })
    }

    /// What `park_step.sql` checks under the run's lock: whether an unconsumed
    /// signal of `name` above `seen_to` (one that came after the claim, or past
    /// its page) or a resolution of the awaited batch wakes the row at once;
    /// and the batch of an earlier attempt the row takes over.
    fn wakes_at_park(
        &self,
        run_id: RunId,
        wait: &ParkWait<'_>,
        seen_to: Option<i64>,
    ) -> (bool, Option<i64>) {
        let signal_arrived = wait.signal.is_some_and(|name| {
            self.runs.get(&run_id.0).is_some_and(|run| {
                run.signals.iter().any(|g| {
                    g.name == name && g.consumed_by.is_none() && g.id.0 > seen_to.unwrap_or(0)
                })
            })
        });
        let batch_resolved = wait
            .batch_id
            .and_then(|id| self.batches.get(&id))
            .is_some_and(|b| b.view.status != "open");
        let adopt = wait.batch_id.filter(|_| wait.adopt);
        (signal_arrived || batch_resolved, adopt)
    }

    /// As `start_children.sql`: the batch, each child run with its first step
    /// and a `started` event. Returns `(batch id, total)`.
    fn start_children(&mut self, claim: &Claim, children: &[ChildRun], actor: &str) -> (i64, i64) {
        let now = self.now;
        let batch_id = self.next_batch;
        self.next_batch += 1;
        let total = i32::try_from(children.len()).unwrap_or(i32::MAX);
        self.batches.insert(
            batch_id,
            BatchRow {
                run_id: claim.run_id,
                view: BatchView {
                    id: batch_id,
                    parent_step_id: claim.step_id,
                    total,
                    finished: 0,
                    cancelled: 0,
                    status: "open".to_owned(),
                    created_at: now,
                    resolved_at: None,
                },
            },
        );
        for child in children {
            let Some((index, entry)) = child.definition.first_step() else {
                continue;
            };
            let id = self.create_run(
                child.definition,
                index,
                entry,
                child.input.clone(),
                None,
                Some(batch_id),
            );
            self.event(
                id,
                None,
                EventKind::Started,
                actor,
                Some("fan_out".to_owned()),
            );
            self.set_details(Some(serde_json::json!({
                "parent_run_id": claim.run_id,
                "batch_id": batch_id,
            })));
        }
        (batch_id, i64::from(total))
    }

    /// As `count_child.sql`: a child run ended with `status`; the last child of
    /// the batch resolves it and wakes the parent's parked step.
    fn count_child(&mut self, batch_id: i64, status: RunStatus, actor: &str) {
        let now = self.now;
        let Some(batch) = self
            .batches
            .get_mut(&batch_id)
            .filter(|b| b.view.status == "open")
        else {
            return;
        };
        if status == RunStatus::Finished {
            batch.view.finished += 1;
        } else {
            batch.view.cancelled += 1;
        }
        if batch.view.finished + batch.view.cancelled < batch.view.total {
            return;
        }
        let status = if batch.view.cancelled > 0 {
            "failed"
        } else {
            "succeeded"
        };
        status.clone_into(&mut batch.view.status);
        batch.view.resolved_at = Some(now);
        let batch = batch.clone();
        self.wake_parent(&batch, actor);
    }

    /// Wakes the parked step of a resolved batch, with a `batch_resolved` event.
    fn wake_parent(&mut self, batch: &BatchRow, actor: &str) {
        let now = self.now;
        let waiting = self
            .steps
            .get(&batch.view.parent_step_id)
            .is_some_and(|step| step.view.status == StepStatus::Waiting);
        if !waiting {
            return;
        }
        let Some(step) = self.update_step(batch.view.parent_step_id, |step| {
            step.view.status = StepStatus::Scheduled;
            step.view.scheduled_at = now;
            step.clone()
        }) else {
            return;
        };
        self.event(
            batch.run_id,
            Some(&step),
            EventKind::BatchResolved,
            actor,
            Some(batch.view.status.clone()),
        );
        self.set_details(Some(serde_json::json!({
            "batch_id": batch.view.id,
            "total": batch.view.total,
            "finished": batch.view.finished,
            "cancelled": batch.view.cancelled,
        })));
    }

    /// As `cancel_children.sql`: cancels the open child runs of `run_id`'s open
    /// batches, and theirs, all the way down, and closes those batches.
    fn cancel_children(&mut self, run_id: RunId, actor: &str) {
        let now = self.now;
        let reason = format!("parent run {run_id} was cancelled");
        let mut parents = vec![run_id];
        while let Some(parent) = parents.pop() {
            let open: Vec<i64> = self
                .batches
                .values()
                .filter(|b| b.run_id == parent && b.view.status == "open")
                .map(|b| b.view.id)
                .collect();
            for batch_id in open {
                if let Some(batch) = self.batches.get_mut(&batch_id) {
                    "failed".clone_into(&mut batch.view.status);
                    batch.view.resolved_at = Some(now);
                }
                let children: Vec<i64> = self
                    .runs
                    .iter()
                    .filter(|(_, run)| run.parent_batch_id == Some(batch_id))
                    .map(|(id, _)| *id)
                    .collect();
                for child in children {
                    let child = RunId(child);
                    let ended = self
                        .runs
                        .get(&child.0)
                        .is_none_or(|run| run.summary.status.is_terminal());
                    parents.push(child);
                    if ended {
                        continue;
                    }
                    if let Some(run) = self.runs.get_mut(&child.0) {
                        run.summary.status = RunStatus::Cancelled;
                        run.summary.updated_at = now;
                        run.cancelled_at = Some(now);
                    }
                    self.cancel_open_steps(child);
                    self.event(
                        child,
                        None,
                        EventKind::Cancelled,
                        actor,
                        Some(reason.clone()),
                    );
                    self.set_details(Some(serde_json::json!({ "cancelled_with": run_id })));
                }
            }
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

    /// As `resolve_batches.sql`, for the sweep: open batches whose children all
    /// ended are counted again from the children and resolved. Returns how many.
    pub(crate) fn resolve_batches(&mut self, limit: i64) -> u64 {
        let now = self.now;
        let stuck: Vec<i64> = self
            .batches
            .values()
            .filter(|b| b.view.status == "open")
            .filter(|b| {
                !self.runs.values().any(|run| {
                    run.parent_batch_id == Some(b.view.id) && !run.summary.status.is_terminal()
                })
            })
            .map(|b| b.view.id)
            .take(usize::try_from(limit).unwrap_or(0))
            .collect();
        let mut resolved = 0;
        for batch_id in stuck {
            let finished = self
                .runs
                .values()
                .filter(|run| {
                    run.parent_batch_id == Some(batch_id)
                        && run.summary.status == RunStatus::Finished
                })
                .count();
            let Some(batch) = self.batches.get_mut(&batch_id) else {
                continue;
            };
            batch.view.finished = i32::try_from(finished).unwrap_or(i32::MAX);
            batch.view.cancelled = batch.view.total - batch.view.finished;
            let status = if batch.view.finished >= batch.view.total {
                "succeeded"
            } else {
                "failed"
            };
            status.clone_into(&mut batch.view.status);
            batch.view.resolved_at = Some(now);
            let batch = batch.clone();
            self.wake_parent(&batch, "sweep");
            resolved += 1;
        }
        resolved
    }

    /// Records a late completion: a `late_completion_ignored` event with what was
    /// discarded.
    fn late(&mut self, claim: &Claim, result: &AttemptResult) {
        let step = self.steps.get(&claim.step_id).cloned();
        self.event(
            claim.run_id,
            step.as_ref(),
            EventKind::LateCompletionIgnored,
            TESTKIT_WORKER,
            None,
        );
        self.set_details(Some(serde_json::json!({
            "verb": format!("{:?}", result.verb),
            "error": result.error.as_ref().map(|e| e.message.clone()),
        })));
    }

    /// As `Client::signal` (the name and payload already checked): records a
    /// signal for a run that has not ended with its `signal_received` event, and
    /// wakes the run's steps waiting for `name`.
    pub(crate) fn signal(
        &mut self,
        run_id: RunId,
        name: &str,
        payload: Value,
    ) -> Result<pgbus_runtime::SignalId, Error> {
        let now = self.now;
        let run = self
            .runs
            .get_mut(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        if run.summary.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id,
                status: run.summary.status,
            });
        }
        let id = self.next_signal;
        self.next_signal += 1;
        run.signals.push(SignalView {
            id: SignalId(id),
            name: name.to_owned(),
            payload,
            created_at: now,
            consumed_by: None,
            consumed_at: None,
        });
        self.event(
            run_id,
            None,
            EventKind::SignalReceived,
            "client",
            Some(name.to_owned()),
        );
        self.set_details(Some(serde_json::json!({ "signal_id": id })));
        for step_id in self.step_ids(run_id) {
            let waiting = self.steps.get(&step_id).is_some_and(|step| {
                step.view.status == StepStatus::Waiting
                    && step.view.waiting_for.as_deref() == Some(name)
            });
            if waiting {
                self.update_step(step_id, |step| {
                    step.view.status = StepStatus::Scheduled;
                    step.view.scheduled_at = now;
                });
            }
        }
        Ok(pgbus_runtime::SignalId(id))
    }

    /// As `Client::pause` and friends: plan an operator action and apply it.
    pub(crate) fn act(
        &mut self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        let workflow = run.summary.workflow.clone();
        let run_error = run.error_class.clone().map(|class| ErrorRecord {
            class,
            message: run.error_message.clone().unwrap_or_default(),
            causes: Vec::new(),
        });
        let latest = run
            .step_ids
            .iter()
            .max()
            .and_then(|id| self.steps.get(id))
            .cloned();
        let state = ActionRun {
            status: run.summary.status,
            current_step: run.summary.current_step.clone(),
            step_plan: Some(run.step_plan.clone()),
            latest: latest.as_ref().map(|step| LatestStep {
                id: step.view.id,
                step_name: step.view.step_name.clone(),
                attempt: step.view.attempt,
                status: step.view.status,
                outcome: step.view.outcome,
                queue: step.view.queue.clone(),
                priority: step.view.priority,
                timeout_ms: step.timeout_ms,
            }),
        };
        let plan = plan_action(action, &state, reason).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
        let now = self.now;
        if plan.skip_latest
            && let Some(latest) = &latest
        {
            self.update_step(latest.view.id, |row| {
                row.view.status = StepStatus::Skipped;
                row.view.outcome = Some(StepOutcome::Skipped);
                row.view.finished_at = Some(now);
            });
        }
        self.apply_change(
            run_id,
            &workflow,
            &Change {
                cancel_open_steps: plan.cancel_open_steps,
                next: plan.next.as_ref(),
                run_status: plan.run_status,
                current_step: plan.current_step.as_deref(),
                run_error: if plan.clear_error {
                    None
                } else {
                    run_error.as_ref()
                },
                events: &plan.events,
            },
            latest.as_ref(),
            actor,
        );
        Ok(plan.run_status)
    }

    /// As `stalled.sql`: up to `limit` attempts in progress past their stall
    /// horizon (`timeout`), or held by a crashed worker silent for longer than
    /// `lost_ms` (`worker_lost`).
    pub(crate) fn stalled(&self, lost_ms: i64, limit: i64) -> Vec<Stalled> {
        let now = self.now;
        let lost_before = before(now, lost_ms);
        self.steps
            .iter()
            .filter(|(_, step)| step.view.status == StepStatus::InProgress)
            .filter_map(|(id, step)| {
                let detection = if step.view.stall_at.is_some_and(|at| at <= now) {
                    "timeout"
                } else {
                    let silent_since = step
                        .view
                        .worker_id
                        .as_deref()
                        .and_then(|worker| self.crashed.get(worker));
                    if silent_since.is_none_or(|since| *since >= lost_before) {
                        return None;
                    }
                    "worker_lost"
                };
                let claim = Claim {
                    step_id: *id,
                    reattempts: step.reattempts,
                    scheduled_at: step.view.scheduled_at,
                    timeout_ms: step.timeout_ms,
                    waiting_since: step.view.waiting_since,
                    ..Claim::new(
                        step.run_id,
                        step.workflow.clone(),
                        step.view.step_name.clone(),
                        step.view.attempt,
                        step.view.started_at.unwrap_or(now),
                    )
                };
                Some(Stalled {
                    claim,
                    worker_id: step.view.worker_id.clone().unwrap_or_default(),
                    detection: detection.to_owned(),
                })
            })
            .take(usize::try_from(limit).unwrap_or(0))
            .collect()
    }

    /// Ends a stalled attempt for the sweep (its body told first), as the
    /// Postgres store's `sweep_attempt`.
    pub(crate) fn sweep_attempt(
        &mut self,
        definition: &'static WorkflowDefinition,
        stalled: &Stalled,
        result: &AttemptResult,
    ) -> Ended {
        if let Some(token) = self.tokens.remove(&stalled.claim.step_id) {
            token.cancel();
        }
        self.end_attempt(
            definition,
            &stalled.claim,
            result,
            &stalled.worker_id,
            Some(&stalled.detection),
        )
    }

    /// As `delete_expired_runs.sql`: deletes up to `limit` finished and
    /// cancelled runs last changed more than `retention_ms` ago, with their
    /// rows. Returns how many.
    pub(crate) fn delete_expired_runs(&mut self, retention_ms: i64, limit: i64) -> u64 {
        let expired_before = before(self.now, retention_ms);
        let expired: Vec<i64> = self
            .runs
            .iter()
            .filter(|(_, run)| {
                run.summary.status.is_terminal() && run.summary.updated_at < expired_before
            })
            .map(|(id, _)| *id)
            .take(usize::try_from(limit).unwrap_or(0))
            .collect();
        let mut deleted = 0;
        for id in expired {
            let Some(run) = self.runs.remove(&id) else {
                continue;
            };
            for step in run.step_ids {
                if let Some(row) = self.steps.remove(&step)
                    && let Some(key) = due_key(step, &row)
                {
                    self.due.remove(&key);
                }
                self.tokens.remove(&step);
            }
            self.batches.retain(|_, batch| batch.run_id.0 != id);
            deleted += 1;
        }
        deleted
    }

    /// Moves the in-progress claim of `run_id` to another worker, as a sweep or a
    /// second worker would take it, and tells the body; `false` when nothing of
    /// the run is in progress.
    pub(crate) fn lose_claim(&mut self, run_id: RunId) -> bool {
        let in_progress = self.step_ids(run_id).into_iter().find(|id| {
            self.steps
                .get(id)
                .is_some_and(|step| step.view.status == StepStatus::InProgress)
        });
        match in_progress.and_then(|id| self.steps.get_mut(&id).map(|step| (id, step))) {
            Some((id, step)) => {
                step.view.worker_id = Some("elsewhere".to_owned());
                if let Some(token) = self.tokens.remove(&id) {
                    token.cancel();
                }
                true
            }
            None => false,
        }
    }

    /// As `Client::run_with`: the whole run, cut as `read` says.
    pub(crate) fn run(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        Ok(read.cut(RunView {
            run: run.summary.clone(),
            definition_digest: run.definition_digest.clone(),
            options_digest: run.options_digest.clone(),
            input: run.input.clone(),
            idempotency_key: run.idempotency_key.clone(),
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
            paused_at: run.paused_at,
            cancelled_at: run.cancelled_at,
            steps: run
                .step_ids
                .iter()
                .filter_map(|id| self.steps.get(id))
                .map(|step| step.view.clone())
                .collect(),
            events: run.events.clone(),
            parent_batch_id: run.parent_batch_id,
            signals: run.signals.clone(),
            batches: self
                .batches
                .values()
                .filter(|b| b.run_id == run_id)
                .map(|b| b.view.clone())
                .collect(),
            counts: RunCounts::default(),
            omitted: Vec::new(),
        }))
    }

    /// A run's status, if it exists.
    pub(crate) fn run_status(&self, run_id: RunId) -> Option<RunStatus> {
        self.runs.get(&run_id.0).map(|run| run.summary.status)
    }

    /// As `Client::list_runs`.
    pub(crate) fn list_runs(&self, filter: &RunFilter) -> Vec<RunSummary> {
        let limit = usize::try_from(filter.limit.unwrap_or(100).clamp(1, 1_000)).unwrap_or(100);
        self.runs
            .values()
            .rev()
            .filter(|run| {
                filter
                    .workflow
                    .as_ref()
                    .is_none_or(|w| *w == run.summary.workflow)
            })
            .filter(|run| filter.status.is_none_or(|s| s == run.summary.status))
            .filter(|run| filter.before.is_none_or(|before| run.summary.id < before))
            .filter(|run| {
                filter
                    .created_after
                    .is_none_or(|after| run.summary.created_at >= after)
            })
            .filter(|run| {
                filter
                    .created_before
                    .is_none_or(|before| run.summary.created_at < before)
            })
            .take(limit)
            .map(|run| run.summary.clone())
            .collect()
    }

    fn outputs(&self, run_id: RunId) -> BTreeMap<String, Value> {
        let mut outputs: BTreeMap<String, (i32, Value)> = BTreeMap::new();
        let rows = self
            .runs
            .get(&run_id.0)
            .map(|run| run.step_ids.as_slice())
            .unwrap_or_default();
        for step in rows.iter().filter_map(|id| self.steps.get(id)) {
            if !matches!(
                step.view.status,
                StepStatus::Completed | StepStatus::Skipped
            ) {
                continue;
            }
            let Some(output) = &step.view.output else {
                continue;
            };
            let newer = outputs
                .get(&step.view.step_name)
                .is_none_or(|(attempt, _)| *attempt < step.view.attempt);
            if newer {
                outputs.insert(
                    step.view.step_name.clone(),
                    (step.view.attempt, output.clone()),
                );
            }
        }
        outputs
            .into_iter()
            .map(|(name, (_, output))| (name, output))
            .collect()
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
                    created_at: self.now,
                },
                run_id,
                workflow: workflow.to_owned(),
                reattempts: new.reattempts,
                timeout_ms: new.timeout_ms,
                open_ended: false,
                signals_seen_to: None,
            },
        );
        if let Some(key) = self.steps.get(&id).and_then(|step| due_key(id, step)) {
            self.due.insert(key);
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
/// and `waiting`) by priority, due time and id; others are not in it.
fn due_key(id: i64, step: &Step) -> Option<(i16, DateTime<Utc>, i64)> {
    matches!(
        step.view.status,
        StepStatus::Scheduled | StepStatus::Waiting
    )
    .then_some((step.view.priority, step.view.scheduled_at, id))
}

/// The signal a step of `run` waits for, from the run's step plan.
fn run_plan_wait_for(run: &Run, step: &str) -> Option<String> {
    run.step_plan
        .iter()
        .find(|planned| planned.name == step)
        .and_then(|planned| planned.wait_for.clone())
}

/// `at` plus `ms` milliseconds, stopping at the last time the clock can show.
/// `ms` milliseconds before `now`, or the earliest time.
fn before(now: DateTime<Utc>, ms: i64) -> DateTime<Utc> {
    now.checked_sub_signed(chrono::Duration::milliseconds(ms))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn add_ms(at: DateTime<Utc>, ms: u64) -> DateTime<Utc> {
    at.checked_add_signed(chrono::Duration::milliseconds(
        i64::try_from(ms).unwrap_or(i64::MAX),
    ))
    .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
