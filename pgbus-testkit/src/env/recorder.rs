//! What `TestEnv::run_next` returns: the record of the attempt it ran, as
//! the attempt ended.

use std::sync::{Mutex, PoisonError};

use pgbus_runtime::engine::{AttemptState, RunState, RunStatus, StepStatus, plan_outcome};
use pgbus_runtime::store::{Attempted, Claim, Ended, Observe};

use super::StepRecord;
use crate::memory::MemoryStore;

/// Builds the [`StepRecord`] of the attempt a `run_next` ran.
pub(super) struct Recorder<'a> {
    pub(super) store: &'a MemoryStore,
    pub(super) record: Mutex<Option<StepRecord>>,
}

impl Observe for Recorder<'_> {
    type Tracked = ();

    fn track(&self, _claim: &Claim) {}

    fn attempted(&self, attempted: &Attempted<'_>) {
        let (claim, result) = (attempted.claim, attempted.result);
        let (status, outcome, run_status, late) = match attempted.ended {
            Some(Ended::Applied(plan) | Ended::Continued(plan, _)) => (
                plan.step_status,
                Some(plan.step_outcome),
                plan.run_status,
                false,
            ),
            Some(Ended::Parked(parked)) => (
                if parked.woken {
                    StepStatus::Scheduled
                } else {
                    StepStatus::Waiting
                },
                None,
                parked.run_status,
                false,
            ),
            // Lost its fence: what the plan would have been, beside the run
            // as it is.
            Some(Ended::Late) | None => {
                let run_status = self
                    .store
                    .rows()
                    .run_status(claim.run_id)
                    .unwrap_or(RunStatus::Cancelled);
                let plan = plan_outcome(
                    attempted.definition,
                    &RunState {
                        step_names: None,
                        step_plan: None,
                        status: run_status,
                        overrides: self.store.rows().overrides(claim.run_id),
                    },
                    &AttemptState {
                        step_name: claim.step_name.clone(),
                        attempt: claim.attempt,
                        reattempts: claim.reattempts,
                    },
                    result,
                );
                let outcome = result.park.is_none().then_some(plan.step_outcome);
                (plan.step_status, outcome, run_status, true)
            }
        };
        *self.record.lock().unwrap_or_else(PoisonError::into_inner) = Some(StepRecord {
            run_id: claim.run_id,
            workflow: claim.workflow.clone(),
            step: claim.step_name.clone(),
            attempt: claim.attempt,
            verb: result.verb.clone(),
            status,
            outcome,
            run_status,
            error: result.error.clone(),
            output: result.output.clone(),
            at: claim.claimed_at,
            late,
        });
    }
}
