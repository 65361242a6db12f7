//! Ending a claimed attempt: fenced, planned with the run locked, and applied; the sweep's end of a stalled one.

use pgbus_runtime::context::CancellationToken;
use pgbus_runtime::engine::{
    AttemptResult, AttemptState, Gate, Plan, RunState, RunStatus, StepStatus, carries_over,
    continued_claim, hands_off, plan_outcome, stall_event,
};
use pgbus_runtime::store::{Claim, Ended, Handoff, Stalled};
use pgbus_runtime::{EventKind, RunId, WorkflowDefinition};

use super::{Change, Rows, Step, TESTKIT_WORKER};

impl Rows {
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
            overrides: run.overrides.clone(),
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
        let fenced = self.steps.get(&claim.step_id).is_some_and(|step| {
            step.view.status == StepStatus::InProgress
                && step.view.attempt == claim.attempt
                && step.view.worker_id.as_deref() == Some(worker)
        });
        let ended = fenced
            .then(|| {
                self.update_step(claim.step_id, |step| {
                    step.view.status = plan.step_status;
                    step.view.outcome = Some(plan.step_outcome);
                    if result.output.is_some() {
                        // A fan_out attempt that recorded none keeps the
                        // output it parked with.
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
                    step.clone()
                })
            })
            .flatten();
        let Some(step) = ended else {
            if detection.is_none() {
                self.late(claim, result);
            }
            return Ended::Late;
        };
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
        definition: &WorkflowDefinition,
    ) -> Ended {
        let now = self.now;
        let Some(run) = self.runs.get(&claim.run_id.0) else {
            return Ended::Applied(plan);
        };
        let (Some(next), Some(&next_id)) = (plan.next.as_ref(), run.step_ids.last()) else {
            return Ended::Applied(plan);
        };
        if !hands_off(&plan, Some(&run.step_plan), handoff.queues, definition)
            || !self.flow_hands_off(&claim.workflow, &next.step_name, &next.queue)
            || !carries_over(claim, result)
            // A run past its deadline starts no step (as a claim).
            || self.past_deadline(claim.run_id)
        {
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
        self.set_run_status(claim.run_id, RunStatus::Performing);
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
    pub(super) fn apply_change(
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
            run.summary.current_step = change.current_step.map(str::to_owned);
            run.summary.updated_at = now;
            run.error_class = change.run_error.map(|e| e.class.clone());
            run.error_message = change.run_error.map(|e| e.message.clone());
        }
        self.set_run_status(run_id, change.run_status);
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

    /// Records a late completion: a `late_completion_ignored` event with what was
    /// discarded.
    pub(super) fn late(&mut self, claim: &Claim, result: &AttemptResult) {
        let step = self.steps.get(&claim.step_id).cloned();
        self.event(
            claim.run_id,
            step.as_ref(),
            EventKind::LateCompletionIgnored,
            TESTKIT_WORKER,
            None,
        );
        self.set_details(Some(serde_json::json!({
            "verb": result.verb.stored(),
            "error": result.error.as_ref().map(|e| e.message.clone()),
        })));
    }

    /// As the Postgres store's `pause_undefined`: ends a due row no live
    /// worker can run with `result`, fenced on the row still unclaimed and due
    /// for longer than `grace_ms`, its run `ready`, and the rule still
    /// holding; applied as the sweep.
    pub(crate) fn pause_undefined(
        &mut self,
        step: &Claim,
        result: &AttemptResult,
        grace_ms: i64,
        lost_ms: i64,
    ) -> Ended {
        let now = self.now;
        let due_before = super::upkeep::before(now, grace_ms);
        let fenced = self.steps.get(&step.step_id).is_some_and(|row| {
            matches!(row.view.status, StepStatus::Scheduled | StepStatus::Waiting)
                && row.held.is_none()
                && row.view.attempt == step.attempt
                && row.view.scheduled_at <= due_before
                && self.undefined(&row.workflow, &row.view.step_name, lost_ms)
        });
        let Some(run) = self.runs.get(&step.run_id.0).filter(|_| fenced) else {
            return Ended::Late;
        };
        if run.summary.status != RunStatus::Ready {
            return Ended::Late;
        }
        let state = RunState {
            status: run.summary.status,
            step_names: Some(run.step_names.clone()),
            step_plan: Some(run.step_plan.clone()),
            overrides: run.overrides.clone(),
        };
        let plan = plan_outcome(
            &pgbus_runtime::__private::STAND_IN_DEFINITION,
            &state,
            &AttemptState {
                step_name: step.step_name.clone(),
                attempt: step.attempt,
                reattempts: step.reattempts,
            },
            result,
        );
        let Some(row) = self.update_step(step.step_id, |row| {
            row.view.status = plan.step_status;
            row.view.outcome = Some(plan.step_outcome);
            row.view.error_class = result.error.as_ref().map(|e| e.class.clone());
            row.view.error_message = result.error.as_ref().map(|e| e.message.clone());
            row.view.error_causes = result
                .error
                .as_ref()
                .map(|e| e.causes.clone())
                .unwrap_or_default();
            row.view.finished_at = Some(now);
            row.clone()
        }) else {
            return Ended::Late;
        };
        self.apply_change(
            step.run_id,
            &step.workflow,
            &Change {
                cancel_open_steps: plan.cancel_open_steps,
                next: plan.next.as_ref(),
                run_status: plan.run_status,
                current_step: plan.current_step.as_deref(),
                run_error: plan.run_error.as_ref(),
                events: &plan.events,
            },
            Some(&row),
            "sweep",
        );
        Ended::Applied(Box::new(plan))
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
}
