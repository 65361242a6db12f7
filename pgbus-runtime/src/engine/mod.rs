//! The engine: pure decisions. Given a definition, the state of a run and of one
//! step attempt, and what the attempt ended with, it returns the changes to make.
//! The Postgres store applies them in one transaction under the run's row lock;
//! the testkit's memory store applies the same plans to its maps.
//!
//! Nothing here does I/O, reads a clock or runs user code.

use pgbus_core::MAX_DURATION_MS;
use serde_json::Value;

use crate::context::SignalId;
use crate::definition::{
    Entry, EntryKind, ExceptionPolicy, FailureAction, PolicyAction, Report, WorkflowDefinition,
};
use crate::error::{StepError, cap_message};
use crate::fan_out::ChildRun;
use crate::flow::Flow;

mod event;
mod handoff;
mod operator;
mod status;

pub use event::EventKind;
pub use handoff::{carries_over, continued_claim, hands_off, stall_event, unstorable_result};
pub use operator::{Action, ActionPlan, ActionRun, IllegalMove, LatestStep, plan_action};
pub use status::{RunStatus, StepOutcome, StepStatus, UnknownStatus};

/// What to do next, once a step attempt has ended: a [`Flow`] verb with its wait
/// normalized to milliseconds (at most [`MAX_DURATION_MS`], the longest duration
/// the option grammar accepts, so a due time always fits a `timestamptz`) and its
/// reason storable (NUL characters become `U+FFFD`, at most 10,000 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    /// Advance to the next step, or finish.
    Complete,
    /// Finish the run now.
    Finish,
    /// Pause the run.
    Pause {
        /// Why.
        reason: String,
    },
    /// Cancel the run.
    Cancel {
        /// Why.
        reason: String,
    },
    /// Skip the step and advance.
    Skip {
        /// Why.
        reason: String,
    },
    /// Run the step again after `wait_ms` milliseconds.
    Reattempt {
        /// Delay before the new attempt, in milliseconds.
        wait_ms: u64,
    },
}

impl Verb {
    /// The verb's word, as a log field carries it: `complete`, `finish`,
    /// `pause`, `cancel`, `skip` or `reattempt`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Finish => "finish",
            Self::Pause { .. } => "pause",
            Self::Cancel { .. } => "cancel",
            Self::Skip { .. } => "skip",
            Self::Reattempt { .. } => "reattempt",
        }
    }
}

impl From<Flow> for Verb {
    fn from(flow: Flow) -> Self {
        match flow {
            Flow::Complete => Self::Complete,
            Flow::Finish => Self::Finish,
            Flow::Pause { reason } => Self::Pause {
                reason: cap_message(&reason),
            },
            Flow::Cancel { reason } => Self::Cancel {
                reason: cap_message(&reason),
            },
            Flow::Skip { reason } => Self::Skip {
                reason: cap_message(&reason),
            },
            Flow::Reattempt { wait } => Self::Reattempt {
                wait_ms: u64::try_from(wait.as_millis())
                    .unwrap_or(u64::MAX)
                    .min(MAX_DURATION_MS),
            },
        }
    }
}

impl Verb {
    pub(crate) fn from_failure_action(action: FailureAction, reason: String) -> Self {
        match action {
            FailureAction::Pause => Self::Pause { reason },
            FailureAction::Cancel => Self::Cancel { reason },
            FailureAction::Skip => Self::Skip { reason },
        }
    }
}

/// An error as the step row and the run row keep it: type name, message (capped)
/// and causes (capped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorRecord {
    /// The Rust type name, e.g. `my_app::CardDeclined`.
    pub class: String,
    /// The message, at most 10,000 characters.
    pub message: String,
    /// The `source()` chain, nearest first, at most 5.
    pub causes: Vec<String>,
}

impl ErrorRecord {
    /// Captures an error.
    #[must_use]
    pub fn of(error: &StepError) -> Self {
        Self {
            class: error.type_name().to_owned(),
            message: error.message(),
            causes: error.causes(),
        }
    }
}

/// How an attempt ended: the verb to apply, the error if the attempt failed, the
/// output it recorded, and whether the error is to be reported.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptResult {
    /// What happens next.
    pub verb: Verb,
    /// The error, when the body, a guard or the engine failed the attempt.
    pub error: Option<ErrorRecord>,
    /// The step's output (`cx.output(..)`), stored on the step row.
    pub output: Option<Value>,
    /// Whether the error is reported (tracing error event and the error hook).
    pub report: bool,
    /// The error of an exception handler that failed (the run pauses); always
    /// reported, after the outcome is committed.
    pub handler_error: Option<ErrorRecord>,
    /// What the `wait_for` gate decided, for a step that waits for a signal.
    pub gate: Option<Gate>,
    /// Set when the attempt does not end but parks its row as `waiting` (for a
    /// signal or a batch); `verb` and `error` are then not applied.
    pub park: Option<Park>,
}

impl AttemptResult {
    /// An attempt that ended with a verb and no error.
    #[must_use]
    pub const fn ok(verb: Verb, output: Option<Value>) -> Self {
        Self {
            verb,
            error: None,
            output,
            report: false,
            handler_error: None,
            gate: None,
            park: None,
        }
    }

    /// An attempt that parks its row (same attempt) until a signal or its batch
    /// wakes it. `output` is stored on the row now (a fan_out body's output).
    #[must_use]
    pub const fn parked(park: Park, output: Option<Value>) -> Self {
        Self {
            verb: Verb::Complete,
            error: None,
            output,
            report: false,
            handler_error: None,
            gate: None,
            park: Some(park),
        }
    }

    /// An attempt that failed with `error`, to apply `verb`.
    #[must_use]
    pub fn failed(verb: Verb, error: &StepError, report: bool) -> Self {
        Self {
            verb,
            error: Some(ErrorRecord::of(error)),
            output: None,
            report,
            handler_error: None,
            gate: None,
            park: None,
        }
    }
}

/// What the `wait_for` gate decided for an attempt that goes on to an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The attempt took this signal; its body saw it in
    /// [`StepCx::signal`](crate::StepCx::signal).
    Signal {
        /// The signal.
        id: SignalId,
        /// Whether this attempt consumes it (`false`: an earlier attempt of the
        /// same step consumed it, and a reattempt sees the same signal).
        fresh: bool,
    },
    /// `wait_timeout` passed with no matching signal; `on_timeout` applied.
    TimedOut,
}

/// Why an attempt parks its row as `waiting` instead of ending.
#[derive(Debug, Clone, PartialEq)]
pub enum Park {
    /// No matching signal yet: wait for signal `name`, until `timeout_ms` after
    /// the row first parked (forever without one).
    Signal {
        /// The signal name.
        name: String,
        /// The highest signal id the gate turned down (its predicate said no
        /// to it and to every unconsumed one before it), if it looked at any.
        /// An unconsumed signal above it when the row parks (one that arrived
        /// meanwhile, or one past the page the claim brought) wakes the row at
        /// once, so no wake-up is lost; later claims bring only signals above
        /// it.
        turned_down_to: Option<SignalId>,
        /// The `wait_timeout`, in milliseconds.
        timeout_ms: Option<u64>,
    },
    /// A fan_out body started these children (never none): create them with
    /// their batch and wait for it.
    Batch {
        /// The children, in the order the body added them.
        children: Vec<ChildRun>,
    },
    /// The step's batch was open at the claim: go on waiting for it. Should it
    /// have resolved since, the row is woken at once.
    BatchOpen {
        /// The batch.
        batch_id: i64,
        /// Whether an earlier attempt of the step started it: this row takes
        /// it over, and its last child wakes this row.
        adopt: bool,
    },
}

impl Park {
    /// What a parked row waits for and until when, as both stores write it.
    #[must_use]
    pub fn wait(&self) -> ParkWait<'_> {
        let forever = ParkWait {
            signal: None,
            turned_down_to: None,
            due_ms: MAX_DURATION_MS,
            from_first_park: false,
            batch_id: None,
            adopt: false,
        };
        match self {
            Self::Signal {
                name,
                turned_down_to,
                timeout_ms,
            } => ParkWait {
                signal: Some(name),
                turned_down_to: *turned_down_to,
                due_ms: timeout_ms.unwrap_or(MAX_DURATION_MS),
                from_first_park: timeout_ms.is_some(),
                ..forever
            },
            Self::Batch { .. } => forever,
            Self::BatchOpen { batch_id, adopt } => ParkWait {
                batch_id: Some(*batch_id),
                adopt: *adopt,
                ..forever
            },
        }
    }
}

/// The row a park leaves: what it waits for and when it is due again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkWait<'a> {
    /// The signal name it waits for (`None`: its batch).
    pub signal: Option<&'a str>,
    /// The highest signal id the gate turned down, if any.
    pub turned_down_to: Option<SignalId>,
    /// Milliseconds until it is due again: its `wait_timeout`, or 36500 days
    /// (it parks again then) for a wait without one.
    pub due_ms: u64,
    /// Whether `due_ms` counts from the row's first park (a `wait_timeout`)
    /// rather than from now.
    pub from_first_park: bool,
    /// The batch it goes on waiting for, for a row claimed while it was open.
    pub batch_id: Option<i64>,
    /// Whether that batch is an earlier attempt's, which this row takes over.
    pub adopt: bool,
}

/// A signal as the gate sees it at a claim: one of the run's signals of the
/// name the step waits for, not consumed or consumed by an earlier attempt of the
/// same step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSignal {
    /// The signal.
    pub id: SignalId,
    /// Its name.
    pub name: String,
    /// Its payload.
    pub payload: Value,
    /// Whether an earlier attempt of this step consumed it.
    pub taken_before: bool,
}

/// A fan_out attempt's batch as the claim found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchState {
    /// The batch (`batches.id`).
    pub id: i64,
    /// Children in it.
    pub total: i32,
    /// Children that finished.
    pub finished: i32,
    /// Children that were cancelled.
    pub cancelled: i32,
    /// Whether children are still running.
    pub open: bool,
    /// Whether this attempt started it (else an earlier attempt of the step
    /// did).
    pub own: bool,
    /// The output of the attempt that started it (its body's, stored when it
    /// parked): an attempt that takes the batch over keeps it.
    pub output: Option<Value>,
}

impl BatchState {
    /// Whether it ended with cancelled children.
    #[must_use]
    pub const fn failed(&self) -> bool {
        !self.open && self.cancelled > 0
    }
}

/// What parking an attempt changes: the run's status (`ready`, or `paused` when
/// an operator paused it meanwhile: a run whose step waits stays `ready`) and
/// the events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkPlan {
    /// The run's new status.
    pub run_status: RunStatus,
    /// Events, in order.
    pub events: Vec<EventSpec>,
}

/// Decides what parking an attempt changes. `run` was read under its lock.
#[must_use]
pub fn plan_park(run: &RunState, park: &Park) -> ParkPlan {
    let run_status = if run.status == RunStatus::Paused {
        RunStatus::Paused
    } else {
        RunStatus::Ready
    };
    let reason = match park {
        Park::Signal { name, .. } => format!("signal `{name}`"),
        Park::Batch { children } => format!("a batch of {} child runs", children.len()),
        Park::BatchOpen { .. } => "its batch of child runs".to_owned(),
    };
    ParkPlan {
        run_status,
        events: vec![step_event(EventKind::StepWaiting, Some(reason))],
    }
}

/// Whether a wait that began at `since` with `timeout_ms` has ended at `now`
/// (all on the store's clock). A row that never parked has not begun waiting.
#[must_use]
pub fn wait_expired(
    since: Option<chrono::DateTime<chrono::Utc>>,
    timeout_ms: Option<u64>,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    match (since, timeout_ms) {
        (Some(since), Some(ms)) => {
            let ms = i64::try_from(ms.min(MAX_DURATION_MS)).unwrap_or(i64::MAX);
            since
                .checked_add_signed(chrono::Duration::milliseconds(ms))
                .is_some_and(|deadline| deadline <= now)
        }
        _ => false,
    }
}

/// What the engine needs to know about the run when an attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// The run's status, read under its row lock.
    pub status: RunStatus,
    /// The live steps of the definition the run started with, in order (`None`
    /// for runs from before they were recorded): the run advances along them.
    pub step_names: Option<Vec<String>>,
    /// Where each of those steps goes (`None` for runs from before it was
    /// recorded): used for a step the deciding definition lacks.
    pub step_plan: Option<Vec<PlannedStep>>,
}

/// The live step names of a definition, in order: what a run records at start.
#[must_use]
pub fn live_step_names(definition: &WorkflowDefinition) -> Vec<String> {
    definition
        .entries
        .iter()
        .filter(|entry| entry.kind != EntryKind::Removed)
        .map(|entry| entry.name.to_owned())
        .collect()
}

/// One live step of the definition a run started with, as the run records it
/// (`runs.step_plan`): enough to schedule the step without the definition, which
/// an operator's resume or skip does not have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlannedStep {
    /// The durable step name.
    pub name: String,
    /// Its queue.
    pub queue: String,
    /// Its priority; lower runs first.
    pub priority: i16,
    /// Its own timeout, in milliseconds, if any.
    pub timeout_ms: Option<i64>,
    /// Its `wait` before the first attempt, in milliseconds.
    pub wait_ms: u64,
    /// The signal it waits for (`wait_for`), if any: the claim hands the run's
    /// signals of that name to the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<String>,
}

impl PlannedStep {
    /// The first attempt of this step.
    #[must_use]
    pub fn first_attempt(&self) -> NewStep {
        NewStep {
            step_name: self.name.clone(),
            attempt: 1,
            reattempts: 0,
            queue: self.queue.clone(),
            priority: self.priority,
            timeout_ms: self.timeout_ms,
            delay_ms: self.wait_ms,
        }
    }
}

/// The step plan a run of `definition` records at start: its live steps, in order.
#[must_use]
pub fn step_plan(definition: &WorkflowDefinition) -> Vec<PlannedStep> {
    definition
        .entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| entry.kind != EntryKind::Removed)
        .map(|(index, entry)| {
            let first = first_attempt(definition, index, entry);
            PlannedStep {
                name: first.step_name,
                queue: first.queue,
                priority: first.priority,
                timeout_ms: first.timeout_ms,
                wait_ms: first.delay_ms,
                wait_for: entry
                    .options
                    .wait_for
                    .as_ref()
                    .map(|wait| wait.signal.to_owned()),
            }
        })
        .collect()
}

/// What the engine needs to know about the attempt that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptState {
    /// The durable step name.
    pub step_name: String,
    /// The attempt number, from 1.
    pub attempt: i32,
    /// Consecutive reattempts of this step before this attempt.
    pub reattempts: i32,
}

/// A step row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    /// The durable step name.
    pub step_name: String,
    /// The attempt number.
    pub attempt: i32,
    /// Consecutive reattempts before this attempt.
    pub reattempts: i32,
    /// The queue it runs on.
    pub queue: String,
    /// Its priority; lower runs first.
    pub priority: i16,
    /// Its own timeout, if any, in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Delay from now (the store's clock) until it is due, in milliseconds.
    pub delay_ms: u64,
}

/// An event row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Its kind.
    pub event: EventKind,
    /// Whether the event is about the attempt that ended (its step id, name and
    /// attempt are filled in) or about the run.
    pub about_step: bool,
    /// Why, when a verb carried a reason.
    pub reason: Option<String>,
    /// What else the event records (`{"signal_id": 7}`).
    pub details: Option<Value>,
}

/// The changes that one ended attempt makes, applied in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The attempt's final status.
    pub step_status: StepStatus,
    /// The attempt's outcome.
    pub step_outcome: StepOutcome,
    /// The row to schedule next, if any.
    pub next: Option<NewStep>,
    /// The run's new status.
    pub run_status: RunStatus,
    /// The run's `current_step` after the change.
    pub current_step: Option<String>,
    /// Error columns for the run: set when the run pauses on an error, cleared
    /// (`None`) otherwise.
    pub run_error: Option<ErrorRecord>,
    /// Cancel every other open step row of the run.
    pub cancel_open_steps: bool,
    /// Events, in order.
    pub events: Vec<EventSpec>,
}

/// Decides what an ended attempt changes. `run` was read under the run's lock:
/// when an operator paused the run while the step ran, the outcome is recorded and
/// the next row scheduled, but the run stays paused (the last step still finishes
/// it).
#[must_use]
pub fn plan_outcome(
    definition: &WorkflowDefinition,
    run: &RunState,
    attempt: &AttemptState,
    result: &AttemptResult,
) -> Plan {
    let failed = result.error.is_some();
    let step_index = definition.entry(&attempt.step_name).map(|(i, _)| i);
    let mut events: Vec<EventSpec> = gate_event(result.gate).into_iter().collect();
    if failed {
        events.push(step_event(EventKind::StepFailed, None));
    }

    let held = run.status == RunStatus::Paused;
    let mut plan = Plan {
        step_status: StepStatus::Completed,
        step_outcome: StepOutcome::Completed,
        next: None,
        run_status: RunStatus::Ready,
        current_step: Some(attempt.step_name.clone()),
        run_error: None,
        cancel_open_steps: false,
        events: Vec::new(),
    };

    match &result.verb {
        Verb::Complete | Verb::Skip { .. } => {
            let skipped = matches!(result.verb, Verb::Skip { .. });
            plan.step_status = if skipped {
                StepStatus::Skipped
            } else {
                StepStatus::Completed
            };
            plan.step_outcome = if skipped {
                StepOutcome::Skipped
            } else {
                StepOutcome::Completed
            };
            if let Verb::Skip { reason } = &result.verb {
                events.push(step_event(EventKind::StepSkipped, Some(reason.clone())));
            } else if !failed {
                events.push(step_event(EventKind::StepCompleted, None));
            }
            advance(
                definition,
                run,
                &attempt.step_name,
                step_index,
                &mut plan,
                &mut events,
                held,
            );
        }
        Verb::Finish => {
            plan.step_outcome = StepOutcome::FinishedEarly;
            if !failed {
                events.push(step_event(EventKind::StepCompleted, None));
            }
            finish(&mut plan, &mut events);
        }
        Verb::Pause { reason } => {
            plan.step_outcome = StepOutcome::Paused;
            if !failed {
                events.push(step_event(EventKind::StepCompleted, None));
            }
            plan.run_status = RunStatus::Paused;
            plan.run_error.clone_from(&result.error);
            events.push(run_event(EventKind::Paused, Some(reason.clone())));
        }
        Verb::Cancel { reason } => {
            plan.step_status = StepStatus::Cancelled;
            plan.step_outcome = StepOutcome::Cancelled;
            plan.run_status = RunStatus::Cancelled;
            plan.cancel_open_steps = true;
            // About the step: the attempt that cancelled the run is named, and
            // every recorded outcome has an event of its own attempt.
            events.push(step_event(EventKind::Cancelled, Some(reason.clone())));
        }
        Verb::Reattempt { wait_ms } => {
            plan.step_status = StepStatus::Failed;
            plan.step_outcome = StepOutcome::Reattempted;
            events.push(step_event(EventKind::StepReattempted, None));
            let (queue, priority, timeout_ms) = step_placement(definition, step_index);
            plan.next = Some(NewStep {
                step_name: attempt.step_name.clone(),
                attempt: attempt.attempt.saturating_add(1),
                reattempts: attempt.reattempts.saturating_add(1),
                queue,
                priority,
                timeout_ms,
                delay_ms: *wait_ms,
            });
            plan.run_status = if held {
                RunStatus::Paused
            } else {
                RunStatus::Ready
            };
        }
    }
    if failed {
        // With an error, every verb leaves the attempt `failed`; the outcome says
        // what followed.
        plan.step_status = StepStatus::Failed;
    }
    plan.events = events;
    plan
}

/// The event saying which way the `wait_for` gate went: `signal_consumed` (with
/// the signal's id) or `wait_timed_out`. None for a reattempt that sees the
/// signal an earlier attempt consumed.
fn gate_event(gate: Option<Gate>) -> Option<EventSpec> {
    match gate? {
        Gate::Signal { id, fresh: true } => Some(EventSpec {
            details: Some(serde_json::json!({ "signal_id": id })),
            ..step_event(EventKind::SignalConsumed, None)
        }),
        Gate::TimedOut => Some(step_event(EventKind::WaitTimedOut, None)),
        Gate::Signal { fresh: false, .. } => None,
    }
}

/// Schedules the step after `current`, or finishes the run. The run's own step
/// list decides what comes next when it has one, so a worker of another version
/// never skips a step the run's version has: a step this definition marks removed
/// is passed over, one it does not know is scheduled anyway (where the run's step
/// plan places it, else on the workflow's queue and priority) and pauses the run
/// with `StepNotDefined` when claimed.
fn advance(
    definition: &WorkflowDefinition,
    run: &RunState,
    current: &str,
    index: Option<usize>,
    plan: &mut Plan,
    events: &mut Vec<EventSpec>,
    held: bool,
) {
    let along_run = run.step_names.as_ref().and_then(|names| {
        let position = names.iter().position(|name| name == current)?;
        Some(
            names[position + 1..]
                .iter()
                .find(|name| {
                    !definition
                        .entry(name)
                        .is_some_and(|(_, entry)| entry.kind == EntryKind::Removed)
                })
                .cloned(),
        )
    });
    let next = match along_run {
        Some(Some(name)) => Some(match definition.entry(&name) {
            Some((next_index, entry)) => first_attempt(definition, next_index, entry),
            None => run
                .step_plan
                .as_ref()
                .and_then(|plan| plan.iter().find(|step| step.name == name))
                .map_or_else(
                    || NewStep {
                        step_name: name.clone(),
                        attempt: 1,
                        reattempts: 0,
                        queue: definition.queue.to_owned(),
                        priority: definition.priority,
                        timeout_ms: None,
                        delay_ms: 0,
                    },
                    PlannedStep::first_attempt,
                ),
        }),
        Some(None) => None,
        None => index
            .and_then(|i| definition.next_step_after(i))
            .map(|(next_index, entry)| first_attempt(definition, next_index, entry)),
    };
    match next {
        Some(next) => {
            plan.current_step = Some(next.step_name.clone());
            plan.next = Some(next);
            plan.run_status = if held {
                RunStatus::Paused
            } else {
                RunStatus::Ready
            };
        }
        None => finish(plan, events),
    }
}

fn finish(plan: &mut Plan, events: &mut Vec<EventSpec>) {
    plan.run_status = RunStatus::Finished;
    events.push(run_event(EventKind::Finished, None));
}

/// The first attempt of entry `index`: its queue, priority, timeout and wait.
#[must_use]
pub fn first_attempt(definition: &WorkflowDefinition, index: usize, entry: &Entry) -> NewStep {
    let (queue, priority, timeout_ms) = step_placement(definition, Some(index));
    NewStep {
        step_name: entry.name.to_owned(),
        attempt: 1,
        reattempts: 0,
        queue,
        priority,
        timeout_ms,
        delay_ms: entry.options.wait_ms,
    }
}

/// Queue, priority and timeout of an entry, the workflow's where it names none.
fn step_placement(
    definition: &WorkflowDefinition,
    index: Option<usize>,
) -> (String, i16, Option<i64>) {
    let options = index
        .and_then(|i| definition.entries.get(i))
        .map(|entry| &entry.options);
    let queue = options
        .and_then(|o| o.queue)
        .unwrap_or(definition.queue)
        .to_owned();
    let priority = options
        .and_then(|o| o.priority)
        .unwrap_or(definition.priority);
    let timeout_ms = options
        .and_then(|o| o.timeout_ms)
        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
    (queue, priority, timeout_ms)
}

fn step_event(event: EventKind, reason: Option<String>) -> EventSpec {
    EventSpec {
        event,
        about_step: true,
        reason,
        details: None,
    }
}

fn run_event(event: EventKind, reason: Option<String>) -> EventSpec {
    EventSpec {
        event,
        about_step: false,
        reason,
        details: None,
    }
}

/// What the exception policies decided for an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Apply this verb.
    Verb {
        /// The verb.
        verb: Verb,
        /// Whether the error is reported.
        report: bool,
    },
    /// Ask this handler; its answer is the verb (no answer pauses).
    Handler {
        /// The handler.
        handler: crate::definition::HandlerRef,
        /// Whether the error is reported.
        report: bool,
    },
}

/// Resolves an error against the policies: the step's in order, then the
/// workflow's that name types, then its blanket ones, then the default pause.
/// `reattempts` is how many reattempts of this step ran in a row before this
/// attempt; a reattempt policy whose `max_reattempts` is used up applies its
/// `terminal_action` instead.
#[must_use]
pub fn resolve_error(
    definition: &WorkflowDefinition,
    entry: Option<&Entry>,
    error: &StepError,
    reattempts: i32,
) -> Resolution {
    let step_policies = entry.map_or(&[][..], |e| e.options.on_exception);
    let policy = step_policies
        .iter()
        .find(|p| p.matches(error))
        .or_else(|| {
            definition
                .on_exception
                .iter()
                .filter(|p| p.names_types())
                .find(|p| p.matches(error))
        })
        .or_else(|| definition.on_exception.iter().find(|p| !p.names_types()));
    let Some(policy) = policy else {
        return Resolution::Verb {
            verb: Verb::Pause {
                reason: format!("step failed: {}", error.message()),
            },
            report: true,
        };
    };
    apply_policy(policy, error, reattempts)
}

fn apply_policy(policy: &ExceptionPolicy, error: &StepError, reattempts: i32) -> Resolution {
    let reason = || format!("step failed: {}", error.message());
    let report_terminal = !matches!(policy.report, Report::Never);
    match policy.action {
        PolicyAction::Pause => Resolution::Verb {
            verb: Verb::Pause { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Cancel => Resolution::Verb {
            verb: Verb::Cancel { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Skip => Resolution::Verb {
            verb: Verb::Skip { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Reattempt {
            wait_ms,
            max_reattempts,
            terminal_action,
        } => {
            let used = u32::try_from(reattempts).unwrap_or(0);
            if used >= max_reattempts {
                Resolution::Verb {
                    verb: Verb::from_failure_action(
                        terminal_action,
                        format!(
                            "step failed after {} attempts in a row: {}",
                            used + 1,
                            error.message()
                        ),
                    ),
                    report: report_terminal,
                }
            } else {
                Resolution::Verb {
                    verb: Verb::Reattempt { wait_ms },
                    report: matches!(policy.report, Report::Always),
                }
            }
        }
        PolicyAction::Handler(handler) => Resolution::Handler {
            handler,
            report: report_terminal,
        },
    }
}

/// What the sweep does with a stalled attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StallAction {
    /// Pause the run (the default); an operator decides.
    #[default]
    Pause,
    /// Run the step again after `wait` (only for workflows the sweeping worker
    /// registered; others are paused).
    Reattempt {
        /// Delay before the new attempt.
        wait: std::time::Duration,
    },
    /// Cancel the run.
    Cancel,
}

/// How the sweep ends a stalled attempt: with a
/// [`StepStalled`](crate::StepStalled) error (always reported) and the stall
/// action's verb. `registered` says whether the sweeper has the workflow's own
/// definition: a reattempt needs it, so without it the run pauses instead.
/// `detection` is `timeout` or `worker_lost`.
#[must_use]
pub fn stalled_result(
    action: StallAction,
    registered: bool,
    step: &str,
    attempt: i32,
    detection: &str,
) -> AttemptResult {
    let error = StepError::from(crate::StepStalled {
        detection: detection.to_owned(),
        step: step.to_owned(),
        attempt,
    });
    let reason = error.message();
    let verb = match action {
        StallAction::Cancel => Verb::Cancel { reason },
        StallAction::Reattempt { wait } if registered => Verb::Reattempt {
            wait_ms: u64::try_from(wait.as_millis())
                .unwrap_or(u64::MAX)
                .min(MAX_DURATION_MS),
        },
        StallAction::Reattempt { .. } | StallAction::Pause => Verb::Pause { reason },
    };
    AttemptResult::failed(verb, &error, true)
}

/// Whether an entry is a gravestone: a row for it is skipped, not run.
#[must_use]
pub fn is_removed(entry: &Entry) -> bool {
    entry.kind == EntryKind::Removed
}

#[cfg(test)]
mod tests;
