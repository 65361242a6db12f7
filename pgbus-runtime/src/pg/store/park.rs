//! Parking an attempt as `waiting`, starting a fan_out's children, and what a run's end changes for fan-out.

use std::collections::BTreeMap;

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::change::{RunChange, StepRef};
use super::outcome::Ending;
use super::{PgStore, check_count, ms, parse_stored};
use crate::engine::{
    AttemptResult, Park, RunOverrides, RunState, RunStatus, first_attempt, plan_park,
};
use crate::error::Error;
use crate::fan_out::ChildRun;
use crate::store::{Claim, Ended, Parked};

impl PgStore {
    /// Parks a claimed attempt as `waiting` (the run is locked): fenced as an
    /// outcome is; for a new batch, creates it with its children.
    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    pub(super) async fn park_in(
        &self,
        tx: &Tx<'_>,
        run: &tokio_postgres::Row,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        park: &Park,
        retrying: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<Ended, Error> {
        let run_status: RunStatus = parse_stored(&run.get::<_, String>("status"))?;
        let plan = plan_park(
            &RunState {
                status: run_status,
                step_names: None,
                step_plan: None,
                overrides: RunOverrides::default(),
            },
            park,
        );
        let wait = park.wait();
        let statement = self.prep.in_tx(tx, &self.sql.park_step).await?;
        let parked = statement
            .query_opt(
                tx,
                &[
                    &claimed.step_id,
                    &claimed.attempt,
                    &worker_id,
                    &wait.signal,
                    &wait.turned_down_to.map(|id| id.0),
                    &ms(wait.due_ms),
                    &wait.from_first_park,
                    &result.output,
                    &now,
                    &wait.batch_id,
                    &wait.adopt,
                ],
            )
            .await?;
        let Some(parked) = parked else {
            let ending = Ending::Outcome { retrying };
            return self
                .fenced_off(tx, claimed, worker_id, result, ending, now, false)
                .await
                .map(|recorded| {
                    if recorded {
                        // Recorded by a try whose reply was lost: how it
                        // parked is not known here; the row says.
                        Ended::Parked(Parked {
                            woken: false,
                            run_status: plan.run_status,
                        })
                    } else {
                        Ended::Late
                    }
                });
        };
        let db_now: DateTime<Utc> = parked.get(0);
        let woken: bool = parked.get("woken");
        let queue: String = parked.get("queue");
        let mut events = plan.events;
        if let Park::Batch { children } = park {
            let (batch_id, total) = self
                .start_children(tx, claimed, worker_id, children, db_now)
                .await?;
            if let Some(event) = events.first_mut() {
                event.details = Some(serde_json::json!({ "batch_id": batch_id, "total": total }));
            }
        }
        if woken {
            let statement = self.prep.in_tx(tx, &self.sql.notify).await?;
            statement
                .query_one(tx, &[&self.schema.channel(), &queue])
                .await?;
        }
        let step = StepRef::of(claimed);
        let change = RunChange {
            run_id: claimed.run_id.0,
            parent_batch_id: None,
            workflow: &claimed.workflow,
            cancel_open_steps: false,
            next: None,
            run_status: plan.run_status,
            current_step: Some(&claimed.step_name),
            run_error: None,
            events: &events,
            claim_next: None,
        };
        self.apply_change(tx, &change, &step, worker_id, db_now)
            .await?;
        Ok(Ended::Parked(Parked {
            woken,
            run_status: plan.run_status,
        }))
    }

    /// Creates a batch of `children` for the parked attempt `claimed`, in one
    /// statement. Returns `(batch id, total)`.
    async fn start_children(
        &self,
        tx: &Tx<'_>,
        claimed: &Claim,
        worker_id: &str,
        children: &[ChildRun],
        now: DateTime<Utc>,
    ) -> Result<(i64, i64), Error> {
        let mut specs = BTreeMap::new();
        for child in children {
            if specs.contains_key(child.workflow) {
                continue;
            }
            let definition = child.definition;
            let Some((index, entry)) = definition.first_step() else {
                return Err(Error::NoSteps {
                    workflow: definition.name.to_owned(),
                });
            };
            let first = first_attempt(definition, index, entry);
            specs.insert(
                child.workflow,
                serde_json::json!({
                    "workflow": definition.name,
                    "digest": definition.digest,
                    "options_digest": definition.options_digest,
                    "step_names": crate::engine::live_step_names(definition),
                    "step_plan": crate::engine::step_plan(definition),
                    "first": {
                        "name": first.step_name,
                        "queue": first.queue,
                        "priority": first.priority,
                        "timeout_ms": first.timeout_ms,
                        "delay_ms": ms(first.delay_ms),
                    },
                }),
            );
        }
        let workflows: Vec<&str> = children.iter().map(|c| c.workflow).collect();
        let inputs: Vec<&Value> = children.iter().map(|c| &c.input).collect();
        let keys: Vec<Option<&str>> = children
            .iter()
            .map(|c| c.concurrency_key.as_deref())
            .collect();
        let specs = Value::Array(specs.into_values().collect());
        let statement = self.prep.in_tx(tx, &self.sql.start_children).await?;
        let row = statement
            .query_one(
                tx,
                &[
                    &claimed.run_id.0,
                    &claimed.step_id,
                    &workflows,
                    &inputs,
                    &specs,
                    &now,
                    &worker_id,
                    &self.schema.channel(),
                    &keys,
                ],
            )
            .await?;
        let total = i64::try_from(children.len()).unwrap_or(i64::MAX);
        check_count("start_children: runs", total, row.get("runs"))?;
        check_count("start_children: steps", total, row.get("steps"))?;
        check_count("start_children: events", total, row.get("events"))?;
        Ok((row.get("batch_id"), total))
    }

    /// What a run's end changes for fan-out: a cancelled run's open children
    /// (and theirs) are cancelled; a child counts toward its batch.
    pub(super) async fn fan_out_changes(
        &self,
        tx: &Tx<'_>,
        change: &RunChange<'_>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let run_id = change.run_id;
        if change.run_status == RunStatus::Cancelled {
            // Lock the open tree first, until no new descendant shows up, so
            // the cancel below reads it all with one snapshot taken after
            // (lock_children.sql).
            let lock = self.prep.in_tx(tx, &self.sql.lock_children).await?;
            let mut locked: Vec<i64> = Vec::new();
            loop {
                let found: Vec<i64> = lock
                    .query(tx, &[&run_id])
                    .await?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                if found.len() <= locked.len() {
                    break;
                }
                locked = found;
            }
            let statement = self.prep.in_tx(tx, &self.sql.cancel_children).await?;
            let reason = format!("parent run {run_id} was cancelled");
            statement
                .query_one(tx, &[&run_id, &now, &actor, &reason, &locked])
                .await?;
        }
        if change.run_status.is_terminal() && change.parent_batch_id.is_some() {
            let statement = self.prep.in_tx(tx, &self.sql.count_child).await?;
            let row = statement
                .query_one(
                    tx,
                    &[
                        &run_id,
                        &change.run_status.as_str(),
                        &now,
                        &actor,
                        &self.schema.channel(),
                    ],
                )
                .await?;
            let woken: i64 = row.get("woken");
            check_count("count_child: events", woken, row.get("events"))?;
        }
        Ok(())
    }
}
