//! Operator actions on a run.

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};

use super::change::{RunChange, StepRef};
use super::{PgStore, TX_ATTEMPTS, check_count, parse_stored, read_step_plan, retryable};
use crate::context::RunId;
use crate::engine::{
    Action, ActionPlan, ActionRun, ErrorRecord, LatestStep, RunStatus, plan_action,
};
use crate::error::Error;

impl PgStore {
    /// Carries out an operator action on a run, in one transaction under its row
    /// lock. Returns the run's new status.
    pub(crate) async fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let now = self.clock.now();
        let mut guarded = self.guarded().await?;
        let acted = in_tx!(@on guarded, |tx| self
            .act_in(&tx, run_id, action, actor, reason, now));
        guarded.finish();
        acted
    }

    async fn act_in(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
        now: Option<DateTime<Utc>>,
    ) -> Result<RunStatus, Error> {
        let Some(run) = self.lock_run(tx, run_id, now).await? else {
            return Err(Error::RunNotFound { run_id });
        };
        let state = self.action_run(tx, run_id, &run).await?;
        let plan = plan_action(action, &state, reason).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
        self.apply_action(tx, run_id, &run, &state, &plan, actor)
            .await?;
        Ok(plan.run_status)
    }

    /// What an operator action decides with: the locked `run` row and its
    /// latest step row.
    pub(super) async fn action_run(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        run: &tokio_postgres::Row,
    ) -> Result<ActionRun, Error> {
        let statement = self.prep.in_tx(tx, &self.sql.latest_step).await?;
        let latest = statement
            .query_opt(tx, &[&run_id.0])
            .await?
            .map(|row| -> Result<LatestStep, Error> {
                let outcome: Option<String> = row.get("outcome");
                Ok(LatestStep {
                    id: row.get("id"),
                    step_name: row.get("step_name"),
                    attempt: row.get("attempt"),
                    status: parse_stored(&row.get::<_, String>("status"))?,
                    outcome: outcome.as_deref().map(parse_stored).transpose()?,
                    queue: row.get("queue"),
                    priority: row.get("priority"),
                    timeout_ms: row.get("timeout_ms"),
                })
            })
            .transpose()?;
        Ok(ActionRun {
            status: parse_stored(&run.get::<_, String>("status"))?,
            current_step: run.get("current_step"),
            step_plan: read_step_plan(run),
            latest,
        })
    }

    /// Applies an operator action's `plan` (decided from `state`) to the
    /// locked `run` row, at the lock's time, recorded as `actor`'s.
    pub(super) async fn apply_action(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        run: &tokio_postgres::Row,
        state: &ActionRun,
        plan: &ActionPlan,
        actor: &str,
    ) -> Result<(), Error> {
        let db_now: DateTime<Utc> = run.get("now");
        let workflow: String = run.get("workflow");
        let step = state.latest.as_ref().map_or(
            StepRef {
                id: 0,
                name: "",
                attempt: 0,
            },
            |latest| StepRef {
                id: latest.id,
                name: &latest.step_name,
                attempt: latest.attempt,
            },
        );
        if plan.skip_latest {
            let statement = self.prep.in_tx(tx, &self.sql.skip_step).await?;
            let skipped = statement.execute(tx, &[&step.id, &db_now]).await?;
            check_count("skip_step", 1, i64::try_from(skipped).unwrap_or(0))?;
        }
        let kept_error = match (
            plan.clear_error,
            run.get::<_, Option<String>>("error_class"),
            run.get::<_, Option<String>>("error_message"),
        ) {
            (false, Some(class), message) => Some(ErrorRecord {
                class,
                message: message.unwrap_or_default(),
                causes: Vec::new(),
            }),
            _ => None,
        };
        let change = RunChange {
            run_id: run_id.0,
            parent_batch_id: run.get("parent_batch_id"),
            workflow: &workflow,
            cancel_open_steps: plan.cancel_open_steps,
            next: plan.next.as_ref(),
            run_status: plan.run_status,
            current_step: plan.current_step.as_deref(),
            run_error: kept_error.as_ref(),
            events: &plan.events,
            claim_next: None,
        };
        self.apply_change(tx, &change, &step, actor, db_now).await?;
        if plan.next.is_none()
            && plan.run_status == RunStatus::Ready
            && let Some(latest) = &state.latest
        {
            // A held row can be claimed again: wake its queue's workers.
            let statement = self.prep.in_tx(tx, &self.sql.notify).await?;
            statement
                .query_one(tx, &[&self.schema.channel(), &latest.queue])
                .await?;
        }
        Ok(())
    }
}
