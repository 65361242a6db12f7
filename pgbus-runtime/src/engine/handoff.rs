//! Decisions about an outcome that the stores used to make on their own: whether
//! its next step is handed to the worker that ran it, what that worker then
//! runs, the event a sweep writes before its plan, and what is recorded when an
//! outcome cannot be stored as it is.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    AttemptResult, EventKind, EventSpec, NewStep, Plan, PlannedStep, RunStatus, StepStatus, Verb,
};
use crate::definition::WorkflowDefinition;
use crate::store::Claim;

/// Whether an outcome's `plan` may hand its next step to the worker that ran
/// the attempt (see [`Handoff`](crate::store::Handoff)): the run stays `ready`,
/// the next step is a first attempt due at once on one of `queues`, the
/// worker's own `definition` holds it (a claim would not take a step it
/// lacks, so neither does a handoff), and its entry waits for no signal (no
/// gate inputs to read). `step_plan`: the run's stored plan (`None` for a run
/// started before plans were stored: never handed on).
#[must_use]
pub fn hands_off(
    plan: &Plan,
    step_plan: Option<&[PlannedStep]>,
    queues: &[String],
    definition: &WorkflowDefinition,
) -> bool {
    let Some(next) = &plan.next else {
        return false;
    };
    plan.run_status == RunStatus::Ready
        && next.delay_ms == 0
        && next.attempt == 1
        && queues.contains(&next.queue)
        && definition.entry(&next.step_name).is_some()
        && step_plan.is_some_and(|steps| {
            steps
                .iter()
                .any(|s| s.name == next.step_name && s.wait_for.is_none())
        })
}

/// Whether what a claim of the next step would read from the store can be
/// carried over from memory as it is: not when this attempt's claim could not
/// read the run's input or outputs (a claim of the next one would fail it the
/// same way), nor when the output is nested deeper than a signal payload may
/// be (the Postgres driver reads back at most 128 levels; such a step goes
/// through the queue, whose claim decides as for any run).
#[must_use]
pub fn carries_over(claim: &Claim, result: &AttemptResult) -> bool {
    claim.unreadable.is_none()
        && result.output.as_ref().is_none_or(|output| {
            crate::context::depth(output) <= crate::context::MAX_SIGNAL_PAYLOAD_DEPTH
        })
}

/// The claim of the step an outcome handed on: what a claim of it would read,
/// the run's input and the outputs of its completed or skipped steps, this
/// one's included (its `result.output`, else `kept_output`, the output a
/// fan_out row parked with), carried over from `claim`. `step_id`: the
/// handed-on row; `now`: the transition's time.
#[must_use]
pub fn continued_claim(
    claim: &Claim,
    plan: &Plan,
    next: &NewStep,
    result: &AttemptResult,
    kept_output: Option<Value>,
    step_id: i64,
    now: DateTime<Utc>,
) -> Claim {
    let mut outputs = claim.outputs.clone();
    if matches!(
        plan.step_status,
        StepStatus::Completed | StepStatus::Skipped
    ) && let Some(output) = result.output.clone().or(kept_output)
    {
        outputs.insert(claim.step_name.clone(), output);
    }
    Claim {
        step_id,
        step_name: next.step_name.clone(),
        attempt: next.attempt,
        reattempts: next.reattempts,
        scheduled_at: now,
        claimed_at: now,
        timeout_ms: next.timeout_ms,
        input: claim.input.clone(),
        outputs,
        tick: claim.tick.clone(),
        ..Claim::new(claim.run_id, claim.workflow.clone(), "", 0, now)
    }
}

/// The `stall_detected` event a sweep writes before its plan's, about the
/// stalled step; `detection` (`timeout` or `worker_lost`) is its reason.
#[must_use]
pub fn stall_event(detection: &str) -> EventSpec {
    EventSpec {
        event: EventKind::StallDetected,
        about_step: true,
        reason: Some(detection.to_owned()),
        details: None,
    }
}

/// What is recorded when an attempt's outcome cannot be stored as it is (an
/// output or text the store refuses; `reason` says why): the attempt failed
/// with an [`Unstorable`](crate::error::Unstorable) error, no output, and the
/// run paused, so it neither hangs nor loops.
#[must_use]
pub fn unstorable_result(reason: String) -> AttemptResult {
    let error = crate::StepError::from(crate::error::Unstorable { reason });
    AttemptResult::failed(
        Verb::Pause {
            reason: error.message(),
        },
        &error,
        true,
    )
}
