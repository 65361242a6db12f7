//! Operator actions on a run.

use pgbus_runtime::engine::{
    Action, ActionPlan, ActionRun, ErrorRecord, LatestStep, RunStatus, StepOutcome, StepStatus,
    plan_action,
};
use pgbus_runtime::{Error, RunId};

use super::{Change, Rows, Step};

impl Rows {
    /// As `Client::pause` and friends: plan an operator action and apply it.
    pub(crate) fn act(
        &mut self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let (state, latest) = self.action_run(run_id)?;
        let plan = plan_action(action, &state, reason).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
        self.apply_action(run_id, latest.as_ref(), &plan, actor);
        Ok(plan.run_status)
    }

    /// What an operator action decides with (as `lock_run.sql` and
    /// `latest_step.sql` read it), and the latest step row.
    pub(super) fn action_run(&self, run_id: RunId) -> Result<(ActionRun, Option<Step>), Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
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
        Ok((state, latest))
    }

    /// Applies an operator action's `plan` to run `run_id`, whose latest
    /// step row is `latest`, recorded as `actor`'s.
    pub(super) fn apply_action(
        &mut self,
        run_id: RunId,
        latest: Option<&Step>,
        plan: &ActionPlan,
        actor: &str,
    ) {
        let Some(run) = self.runs.get(&run_id.0) else {
            return;
        };
        let workflow = run.summary.workflow.clone();
        let run_error = run.error_class.clone().map(|class| ErrorRecord {
            class,
            message: run.error_message.clone().unwrap_or_default(),
            causes: Vec::new(),
        });
        let now = self.now;
        if plan.skip_latest
            && let Some(latest) = latest
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
            latest,
            actor,
        );
    }
}
