//! The memory store: the Postgres store's rows as maps, changed by the same engine
//! plans, on a virtual clock.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use pgbus_runtime::context::CancellationToken;
use pgbus_runtime::engine::{
    Action, ActionRun, AttemptResult, AttemptState, ErrorRecord, EventSpec, LatestStep, NewStep,
    Plan, PlannedStep, RunState, RunStatus, StallAction, StepOutcome, StepStatus, first_attempt,
    plan_action, plan_outcome, stalled_result,
};
use pgbus_runtime::{
    Error, EventView, RunFilter, RunId, RunSummary, RunView, StepView, WorkflowDefinition,
};
use serde_json::Value;

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
}

#[derive(Debug, Clone)]
struct Step {
    view: StepView,
    run_id: RunId,
    workflow: String,
    reattempts: i32,
    timeout_ms: Option<i64>,
    /// The signal a parked row waits for.
    waiting_for: Option<String>,
}

/// A signal row: what retention needs of it so far (the `wait_for` gate that
/// reads the rest is not built yet).
#[derive(Debug, Clone)]
struct SignalRow {
    run_id: RunId,
}

/// The worker a crashed claim names, with a number ([`MemoryStore::crash_next`]):
/// it stopped heartbeating at the claim.
pub(crate) const CRASHED_WORKER: &str = "crashed";

/// A claimed attempt, as the memory store hands it out.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) step_id: i64,
    pub(crate) run_id: RunId,
    pub(crate) workflow: String,
    pub(crate) step_name: String,
    pub(crate) attempt: i32,
    pub(crate) reattempts: i32,
    pub(crate) timeout_ms: Option<i64>,
    pub(crate) input: Value,
    pub(crate) outputs: BTreeMap<String, Value>,
    pub(crate) cancellation: CancellationToken,
}

/// The run-level changes of an outcome or action plan.
struct Change<'a> {
    cancel_open_steps: bool,
    next: Option<&'a NewStep>,
    run_status: RunStatus,
    current_step: Option<&'a str>,
    run_error: Option<&'a ErrorRecord>,
    events: &'a [EventSpec],
}

/// Runs, step rows and events in memory.
#[derive(Debug)]
pub(crate) struct MemoryStore {
    pub(crate) now: DateTime<Utc>,
    runs: BTreeMap<i64, Run>,
    steps: BTreeMap<i64, Step>,
    events: Vec<(RunId, EventView)>,
    next_run: i64,
    next_step: i64,
    next_event: i64,
    /// Cancellation of the attempts in progress, by step id.
    tokens: BTreeMap<i64, CancellationToken>,
    /// Workers that died, with the time their heartbeat stopped.
    crashed: BTreeMap<String, DateTime<Utc>>,
    signals: Vec<SignalRow>,
    next_signal: i64,
}

impl MemoryStore {
    pub(crate) fn new(now: DateTime<Utc>) -> Self {
        Self {
            now,
            runs: BTreeMap::new(),
            steps: BTreeMap::new(),
            events: Vec::new(),
            next_run: 1,
            next_step: 1,
            next_event: 1,
            tokens: BTreeMap::new(),
            crashed: BTreeMap::new(),
            signals: Vec::new(),
            next_signal: 1,
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
            },
        );
        self.insert_step(id, definition.name, &first);
        self.event(id, None, "started", "client", None);
        Ok((id, true))
    }

    /// The due step that a claim would take first, for workflows in `registered`:
    /// lowest priority number, then earliest due, then oldest row; runs `ready`.
    pub(crate) fn claim(&mut self, registered: &[&str]) -> Option<Claim> {
        self.claim_as(registered, TESTKIT_WORKER)
    }

    /// Claims the next due step as `worker` would.
    fn claim_as(&mut self, registered: &[&str], worker: &str) -> Option<Claim> {
        let now = self.now;
        let (&step_id, _) = self
            .steps
            .iter()
            .filter(|(_, step)| {
                step.view.status == StepStatus::Scheduled
                    && step.view.scheduled_at <= now
                    && registered.contains(&step.workflow.as_str())
                    && self
                        .runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
            })
            .min_by_key(|(id, step)| (step.view.priority, step.view.scheduled_at, **id))?;
        let step = self.steps.get_mut(&step_id)?;
        step.view.status = StepStatus::InProgress;
        step.view.started_at = Some(now);
        step.view.worker_id = Some(worker.to_owned());
        let stall_ms = step.timeout_ms.unwrap_or(300_000);
        step.view.stall_at = now.checked_add_signed(chrono::Duration::milliseconds(stall_ms));
        let step = step.clone();
        let run = self.runs.get_mut(&step.run_id.0)?;
        run.summary.status = RunStatus::Performing;
        run.summary.updated_at = now;
        let input = run.input.clone();
        self.event(step.run_id, Some(&step), "step_started", worker, None);
        let cancellation = CancellationToken::new();
        self.tokens.insert(step_id, cancellation.clone());
        Some(Claim {
            step_id,
            run_id: step.run_id,
            workflow: step.workflow.clone(),
            step_name: step.view.step_name.clone(),
            attempt: step.view.attempt,
            reattempts: step.reattempts,
            timeout_ms: step.timeout_ms,
            input,
            outputs: self.outputs(step.run_id),
            cancellation,
        })
    }

    /// Claims the next due step for a worker that dies at once: the row stays in
    /// progress under a worker named after [`CRASHED_WORKER`], whose heartbeat
    /// stopped now. Returns the
    /// run, if a step was due.
    pub(crate) fn crash_next(&mut self, registered: &[&str]) -> Option<RunId> {
        let worker = format!("{CRASHED_WORKER}-{}", self.crashed.len() + 1);
        let claim = self.claim_as(registered, &worker)?;
        self.tokens.remove(&claim.step_id);
        let now = self.now;
        self.crashed.insert(worker, now);
        Some(claim.run_id)
    }

    /// Milliseconds until the next claimable step is due, if any.
    pub(crate) fn next_due(&self, registered: &[&str]) -> Option<DateTime<Utc>> {
        self.steps
            .values()
            .filter(|step| {
                step.view.status == StepStatus::Scheduled
                    && registered.contains(&step.workflow.as_str())
                    && self
                        .runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
            })
            .map(|step| step.view.scheduled_at)
            .min()
    }

    /// As the Postgres store's `end_attempt`: fence, plan, apply. `None` when the
    /// attempt lost its fence (a late completion).
    pub(crate) fn end_attempt(
        &mut self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        result: &AttemptResult,
    ) -> Option<Plan> {
        self.end_attempt_as(definition, claim, result, TESTKIT_WORKER, None)
    }

    /// Ends an attempt fenced on `worker`'s claim; for the sweep (`detection`
    /// given) with a `stall_detected` event first, and no late-completion event
    /// when the fence fails.
    fn end_attempt_as(
        &mut self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        result: &AttemptResult,
        worker: &str,
        detection: Option<&str>,
    ) -> Option<Plan> {
        let now = self.now;
        let run = self.runs.get(&claim.run_id.0)?;
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
            plan.events.insert(
                0,
                EventSpec {
                    event: "stall_detected",
                    about_step: true,
                    reason: Some(detection.to_owned()),
                },
            );
        }
        let actor = if detection.is_some() { "sweep" } else { worker };
        let fenced = self.steps.get_mut(&claim.step_id).filter(|step| {
            step.view.status == StepStatus::InProgress
                && step.view.attempt == claim.attempt
                && step.view.worker_id.as_deref() == Some(worker)
        });
        let Some(step) = fenced else {
            if detection.is_some() {
                return None;
            }
            let step = self.steps.get(&claim.step_id).cloned();
            self.event(
                claim.run_id,
                step.as_ref(),
                "late_completion_ignored",
                TESTKIT_WORKER,
                None,
            );
            // What the Postgres store records beside it: what was discarded.
            if let Some((_, event)) = self.events.last_mut() {
                event.details = Some(serde_json::json!({
                    "verb": format!("{:?}", result.verb),
                    "error": result.error.as_ref().map(|e| e.message.clone()),
                }));
            }
            return None;
        };
        step.view.status = plan.step_status;
        step.view.outcome = Some(plan.step_outcome);
        step.view.output.clone_from(&result.output);
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
        Some(plan)
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
            for (id, other) in &mut self.steps {
                if other.run_id == run_id
                    && matches!(
                        other.view.status,
                        StepStatus::Scheduled | StepStatus::InProgress | StepStatus::Waiting
                    )
                {
                    other.view.status = StepStatus::Cancelled;
                    other.view.outcome = Some(StepOutcome::Cancelled);
                    other.view.finished_at = Some(now);
                    if let Some(token) = self.tokens.remove(id) {
                        token.cancel();
                    }
                }
            }
        }
        if let Some(next) = change.next {
            self.insert_step(run_id, workflow, next);
        }
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
        }
    }

    /// As `Client::signal` (the name and payload already checked): records a
    /// signal for a run that has not ended with its `signal_received` event, and
    /// wakes the run's steps waiting for `name`. The payload is not kept yet: no
    /// memory step waits for signals until the `wait_for` gate exists.
    pub(crate) fn signal(
        &mut self,
        run_id: RunId,
        name: &str,
    ) -> Result<pgbus_runtime::SignalId, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        if run.summary.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id,
                status: run.summary.status,
            });
        }
        let id = self.next_signal;
        self.next_signal += 1;
        self.signals.push(SignalRow { run_id });
        self.event(
            run_id,
            None,
            "signal_received",
            "client",
            Some(name.to_owned()),
        );
        if let Some((_, event)) = self.events.last_mut() {
            event.details = Some(serde_json::json!({ "signal_id": id }));
        }
        let now = self.now;
        for step in self.steps.values_mut() {
            if step.run_id == run_id
                && step.view.status == StepStatus::Waiting
                && step.waiting_for.as_deref() == Some(name)
            {
                step.view.status = StepStatus::Scheduled;
                step.view.scheduled_at = now;
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
        let latest = self
            .steps
            .values()
            .filter(|step| step.run_id == run_id)
            .max_by_key(|step| step.view.id)
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
            && let Some(row) = self.steps.get_mut(&latest.view.id)
        {
            row.view.status = StepStatus::Skipped;
            row.view.outcome = Some(StepOutcome::Skipped);
            row.view.finished_at = Some(now);
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

    /// As the worker's sweep: ends stalled attempts (past `stall_at`: `timeout`;
    /// held by a crashed worker silent for longer than `lost_ms`: `worker_lost`)
    /// with `action`, then deletes finished and cancelled runs last changed more
    /// than `retention_ms` ago. `definitions` are the registered workflows.
    /// Returns (repaired, runs deleted).
    pub(crate) fn sweep(
        &mut self,
        definitions: &BTreeMap<&str, &'static WorkflowDefinition>,
        action: StallAction,
        lost_ms: i64,
        retention_ms: Option<i64>,
    ) -> (usize, usize) {
        let now = self.now;
        let before = |ms: i64| {
            now.checked_sub_signed(chrono::Duration::milliseconds(ms))
                .unwrap_or(DateTime::<Utc>::MIN_UTC)
        };
        let lost_before = before(lost_ms);
        let stalled: Vec<(i64, &'static str)> = self
            .steps
            .iter()
            .filter(|(_, step)| step.view.status == StepStatus::InProgress)
            .filter_map(|(id, step)| {
                if step.view.stall_at.is_some_and(|at| at <= now) {
                    return Some((*id, "timeout"));
                }
                let silent_since = step
                    .view
                    .worker_id
                    .as_deref()
                    .and_then(|worker| self.crashed.get(worker));
                silent_since
                    .is_some_and(|since| *since < lost_before)
                    .then_some((*id, "worker_lost"))
            })
            .collect();
        let mut repaired = 0;
        for (id, detection) in stalled {
            let Some(step) = self.steps.get(&id).cloned() else {
                continue;
            };
            let registered = definitions.get(step.workflow.as_str()).copied();
            let definition = registered.unwrap_or(&pgbus_runtime::__private::STAND_IN_DEFINITION);
            let result = stalled_result(
                action,
                registered.is_some(),
                &step.view.step_name,
                step.view.attempt,
                detection,
            );
            let claim = Claim {
                step_id: id,
                run_id: step.run_id,
                workflow: step.workflow.clone(),
                step_name: step.view.step_name.clone(),
                attempt: step.view.attempt,
                reattempts: step.reattempts,
                timeout_ms: step.timeout_ms,
                input: Value::Null,
                outputs: BTreeMap::new(),
                cancellation: CancellationToken::new(),
            };
            let worker = step.view.worker_id.clone().unwrap_or_default();
            if let Some(token) = self.tokens.remove(&id) {
                token.cancel();
            }
            if self
                .end_attempt_as(definition, &claim, &result, &worker, Some(detection))
                .is_some()
            {
                repaired += 1;
            }
        }
        let mut deleted = 0;
        if let Some(retention_ms) = retention_ms {
            let expired_before = before(retention_ms);
            let expired: Vec<i64> = self
                .runs
                .iter()
                .filter(|(_, run)| {
                    run.summary.status.is_terminal() && run.summary.updated_at < expired_before
                })
                .map(|(id, _)| *id)
                .collect();
            for id in expired {
                self.runs.remove(&id);
                self.steps.retain(|_, step| step.run_id.0 != id);
                self.events.retain(|(run, _)| run.0 != id);
                self.signals.retain(|signal| signal.run_id.0 != id);
                deleted += 1;
            }
        }
        (repaired, deleted)
    }

    /// Moves the in-progress claim of `run_id` to another worker, as a sweep or a
    /// second worker would take it, and tells the body; `false` when nothing of
    /// the run is in progress.
    pub(crate) fn lose_claim(&mut self, run_id: RunId) -> bool {
        let step = self
            .steps
            .iter_mut()
            .find(|(_, step)| step.run_id == run_id && step.view.status == StepStatus::InProgress);
        match step {
            Some((id, step)) => {
                step.view.worker_id = Some("elsewhere".to_owned());
                if let Some(token) = self.tokens.remove(id) {
                    token.cancel();
                }
                true
            }
            None => false,
        }
    }

    /// As `Client::run`.
    pub(crate) fn run(&self, run_id: RunId) -> Result<RunView, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        Ok(RunView {
            run: run.summary.clone(),
            definition_digest: run.definition_digest.clone(),
            options_digest: run.options_digest.clone(),
            input: run.input.clone(),
            idempotency_key: run.idempotency_key.clone(),
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
            paused_at: run.paused_at,
            cancelled_at: run.cancelled_at,
            steps: self
                .steps
                .values()
                .filter(|step| step.run_id == run_id)
                .map(|step| step.view.clone())
                .collect(),
            events: self
                .events
                .iter()
                .filter(|(run, _)| *run == run_id)
                .map(|(_, event)| event.clone())
                .collect(),
        })
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
            .take(limit)
            .map(|run| run.summary.clone())
            .collect()
    }

    fn outputs(&self, run_id: RunId) -> BTreeMap<String, Value> {
        let mut outputs: BTreeMap<String, (i32, Value)> = BTreeMap::new();
        for step in self.steps.values().filter(|step| step.run_id == run_id) {
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
                },
                run_id,
                workflow: workflow.to_owned(),
                reattempts: new.reattempts,
                timeout_ms: new.timeout_ms,
                waiting_for: None,
            },
        );
    }

    fn event(
        &mut self,
        run_id: RunId,
        step: Option<&Step>,
        event: &str,
        actor: &str,
        reason: Option<String>,
    ) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.push((
            run_id,
            EventView {
                id,
                step_id: step.map(|s| s.view.id),
                step_name: step.map(|s| s.view.step_name.clone()),
                attempt: step.map(|s| s.view.attempt),
                event: event.to_owned(),
                actor: actor.to_owned(),
                reason,
                details: None,
                created_at: self.now,
            },
        ));
    }
}
