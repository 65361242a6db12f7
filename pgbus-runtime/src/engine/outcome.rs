//! Planning what an ended attempt changes: the step row, the next row, the run
//! and the events.

use super::plan::{run_event, step_event};
use super::step_plan::step_placement;
use super::{
    AttemptResult, AttemptState, EventKind, EventSpec, Gate, NewStep, Plan, PlannedStep, RunState,
    RunStatus, StepOutcome, StepStatus, Verb, first_attempt_for,
};
use crate::definition::{EntryKind, WorkflowDefinition};

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
            let (queue, priority, timeout_ms) =
                step_placement(definition, step_index, &run.overrides);
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
/// plan places it, else on the run's queue and priority, else the workflow's)
/// and pauses the run
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
            Some((next_index, entry)) => {
                first_attempt_for(definition, next_index, entry, &run.overrides)
            }
            None => run
                .step_plan
                .as_ref()
                .and_then(|plan| plan.iter().find(|step| step.name == name))
                .map_or_else(
                    || NewStep {
                        step_name: name.clone(),
                        attempt: 1,
                        reattempts: 0,
                        queue: run
                            .overrides
                            .queue
                            .clone()
                            .unwrap_or_else(|| definition.queue.to_owned()),
                        priority: run.overrides.priority.unwrap_or(definition.priority),
                        timeout_ms: None,
                        delay_ms: 0,
                    },
                    PlannedStep::first_attempt,
                ),
        }),
        Some(None) => None,
        None => index
            .and_then(|i| definition.next_step_after(i))
            .map(|(next_index, entry)| {
                first_attempt_for(definition, next_index, entry, &run.overrides)
            }),
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
