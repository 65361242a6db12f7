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
///
/// Never for a workflow with a concurrency or rate limit
/// ([`FlowControl::limits`](crate::FlowControl::limits)), nor for a next
/// step with a `rate_limit` of its own: a handoff takes no slot and records
/// no start, so such a step goes through the claim, which admits it under
/// the limits (a store that knows limits the definition does not, a queue's,
/// or another version's, checks those too: [`handoff_within_limits`]).
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
        && !definition.flow.limits()
        && definition
            .entry(&next.step_name)
            .is_some_and(|(_, entry)| entry.options.rate_limit.is_none())
        && step_plan.is_some_and(|steps| {
            steps
                .iter()
                .any(|s| s.name == next.step_name && s.wait_for.is_none())
        })
}

/// Whether the step `next` of a run of `workflow` may be handed on under the
/// flow limits a store has in force, `in_force` (their limit keys, as
/// registered: `workflow:<W>`, `key:<W>`, `queue:<Q>`, `step:<W>/<step>`):
/// not when any of them applies to it (the workflow's concurrency or rate,
/// its per-key limits, the next step's queue or its own rate). What
/// [`hands_off`] cannot see from the worker's definition: a queue's limit
/// (declared by any worker of the fleet) and the limits another version of
/// the workflow registered.
#[must_use]
pub fn handoff_within_limits(next: &NewStep, workflow: &str, in_force: &[String]) -> bool {
    let applies = |key: &String| {
        key.strip_prefix("workflow:") == Some(workflow)
            || key.strip_prefix("key:") == Some(workflow)
            || key.strip_prefix("queue:") == Some(next.queue.as_str())
            || key
                .strip_prefix("step:")
                .and_then(|rest| rest.strip_prefix(workflow))
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(next.step_name.as_str())
    };
    !in_force.iter().any(applies)
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

#[cfg(test)]
mod tests;
