//! Writing an ending's change: the events, the next step's row, the run row
//! and the wake-up, in one pipeline (`apply_change`), and the shapes the
//! outcome, park and operator paths describe a change with.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{PgStore, check_count, ms};
use crate::engine::{ErrorRecord, EventSpec, NewStep, RunStatus};
use crate::error::Error;
use crate::pg::statement::Prepared;
use crate::pg::tx::Tx;
use crate::store::Claim;

impl PgStore {
    pub(super) async fn apply_change(
        &self,
        tx: &Tx<'_>,
        change: &RunChange<'_>,
        step: &StepRef<'_>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, Error> {
        let run_id = change.run_id;
        let workflow = change.workflow;
        let plan = change;
        if plan.cancel_open_steps {
            let statement = self.prep.in_tx(tx, &self.sql.cancel_open_steps).await?;
            statement.execute(tx, &[&run_id, &now]).await?;
        }
        self.fan_out_changes(tx, plan, actor, now).await?;
        // The rest goes out in one pipeline: the events, the next step row,
        // the run row and the wake-up are independent of each other's
        // results, so they cost one round trip, not four. Sent in this order
        // (the events before the step a handoff starts, so their ids stay in
        // the order a claim would give them); polled in that order (`biased`),
        // so the first error to come back, the real one, is the one returned,
        // not a later statement's "transaction is aborted".
        let events = self.prep.in_tx(tx, &self.sql.insert_events).await?;
        let insert_step = self.prep.in_tx(tx, &self.sql.insert_step).await?;
        let update_run = self.prep.in_tx(tx, &self.sql.update_run).await?;
        let notify = self.prep.in_tx(tx, &self.sql.notify).await?;
        let claimer = plan.next.and(plan.claim_next);
        // A run whose next step this worker takes is `performing`, as a
        // claim leaves it.
        let run_status = if claimer.is_some() {
            RunStatus::Performing
        } else {
            plan.run_status
        };
        let rows = EventRows::of(plan.events, step);
        let insert_events = Self::insert_events(tx, &events, run_id, &rows, actor, now);
        let (worker, stall_threshold_ms) = claimer.unzip();
        let next_step = async {
            let Some(next) = plan.next else {
                return Ok(None);
            };
            let row = insert_step
                .query_one(
                    tx,
                    &[
                        &run_id,
                        &workflow,
                        &next.step_name,
                        &next.attempt,
                        &next.reattempts,
                        &next.queue,
                        &next.priority,
                        &next.timeout_ms,
                        &ms(next.delay_ms),
                        &now,
                        &worker,
                        &stall_threshold_ms,
                    ],
                )
                .await?;
            check_count(
                "insert_step: step_started",
                i64::from(worker.is_some()),
                row.get("started"),
            )?;
            Ok(worker.map(|_| row.get::<_, i64>("id")))
        };
        let run_row = async {
            let updated = update_run
                .execute(
                    tx,
                    &[
                        &run_id,
                        &run_status.as_str(),
                        &plan.current_step,
                        &plan.run_error.map(|e| e.class.as_str()),
                        &plan.run_error.map(|e| e.message.as_str()),
                        &now,
                    ],
                )
                .await?;
            check_count("update_run", 1, i64::try_from(updated).unwrap_or(0))
        };
        // Wake workers even for a delayed step: they learn its due time and
        // sleep until then instead of until the next poll. A step handed to
        // this worker wakes no one.
        let wake = async {
            match plan.next {
                Some(next) if plan.run_status == RunStatus::Ready && worker.is_none() => notify
                    .query_one(tx, &[&self.schema.channel(), &next.queue])
                    .await
                    .map(drop),
                _ => Ok(()),
            }
        };
        let ((), claimed_next, (), ()) =
            tokio::try_join!(biased; insert_events, next_step, run_row, wake)?;
        Ok(claimed_next)
    }

    /// Appends `rows` (events of run `run_id`) with `statement`
    /// (`insert_events.sql`, prepared); nothing when there are none.
    async fn insert_events(
        tx: &Tx<'_>,
        statement: &Prepared<'_>,
        run_id: i64,
        rows: &EventRows,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        if rows.events.is_empty() {
            return Ok(());
        }
        let inserted = statement
            .execute(
                tx,
                &[
                    &run_id,
                    &rows.step_ids,
                    &rows.step_names,
                    &rows.attempts,
                    &rows.events,
                    &actor,
                    &rows.reasons,
                    &now,
                    &rows.details,
                ],
            )
            .await?;
        check_count(
            "insert_events",
            i64::try_from(rows.events.len()).unwrap_or(i64::MAX),
            i64::try_from(inserted).unwrap_or(0),
        )
    }
}

/// A change's events as the columns `insert_events.sql` takes (and
/// `end_group.sql`, for the changes of a group).
#[derive(Default)]
pub(super) struct EventRows {
    pub(super) step_ids: Vec<Option<i64>>,
    pub(super) step_names: Vec<Option<String>>,
    pub(super) attempts: Vec<Option<i32>>,
    pub(super) events: Vec<&'static str>,
    pub(super) reasons: Vec<Option<String>>,
    pub(super) details: Vec<Option<Value>>,
}

impl EventRows {
    /// Appends `other`'s rows after these.
    pub(super) fn extend(&mut self, other: Self) {
        self.step_ids.extend(other.step_ids);
        self.step_names.extend(other.step_names);
        self.attempts.extend(other.attempts);
        self.events.extend(other.events);
        self.reasons.extend(other.reasons);
        self.details.extend(other.details);
    }

    /// `events`, those about a step filled in with `step`.
    pub(super) fn of(events: &[EventSpec], step: &StepRef<'_>) -> Self {
        Self {
            step_ids: events
                .iter()
                .map(|e| e.about_step.then_some(step.id))
                .collect(),
            step_names: events
                .iter()
                .map(|e| e.about_step.then(|| step.name.to_owned()))
                .collect(),
            attempts: events
                .iter()
                .map(|e| e.about_step.then_some(step.attempt))
                .collect(),
            events: events.iter().map(|e| e.event.as_str()).collect(),
            reasons: events.iter().map(|e| e.reason.clone()).collect(),
            details: events.iter().map(|e| e.details.clone()).collect(),
        }
    }
}

/// A step row that events of a change are about.
pub(super) struct StepRef<'a> {
    pub(super) id: i64,
    pub(super) name: &'a str,
    pub(super) attempt: i32,
}

impl<'a> StepRef<'a> {
    /// The row `claimed` holds.
    pub(super) fn of(claimed: &'a Claim) -> Self {
        Self {
            id: claimed.step_id,
            name: &claimed.step_name,
            attempt: claimed.attempt,
        }
    }
}

/// The run-level changes of an outcome plan or an action plan.
pub(super) struct RunChange<'a> {
    pub(super) run_id: i64,
    /// For a fan_out child: its batch, which its end counts toward.
    pub(super) parent_batch_id: Option<i64>,
    pub(super) workflow: &'a str,
    pub(super) cancel_open_steps: bool,
    pub(super) next: Option<&'a NewStep>,
    pub(super) run_status: RunStatus,
    pub(super) current_step: Option<&'a str>,
    pub(super) run_error: Option<&'a ErrorRecord>,
    pub(super) events: &'a [EventSpec],
    /// Claim `next` for this worker id, with this stall threshold (ms),
    /// instead of scheduling it (see [`Handoff`]).
    pub(super) claim_next: Option<(&'a str, i64)>,
}

impl<'a> RunChange<'a> {
    /// The change of an attempt's outcome `plan`; `parent_batch_id` is the
    /// run's (a fan_out child's batch).
    pub(super) fn of_outcome(
        claimed: &'a Claim,
        parent_batch_id: Option<i64>,
        plan: &'a crate::engine::Plan,
        claim_next: Option<(&'a str, i64)>,
    ) -> Self {
        Self {
            run_id: claimed.run_id.0,
            parent_batch_id,
            workflow: &claimed.workflow,
            cancel_open_steps: plan.cancel_open_steps,
            next: plan.next.as_ref(),
            run_status: plan.run_status,
            current_step: plan.current_step.as_deref(),
            run_error: plan.run_error.as_ref(),
            events: &plan.events,
            claim_next,
        }
    }

    /// Whether [`PgStore::apply_change`] sends every statement of this change
    /// in one pipeline, none awaited before the next is sent: no open steps
    /// to cancel, and nothing of a fan-out (a cancel's tree, a child's count
    /// toward its batch), which read before they write.
    pub(super) fn pipelines(&self) -> bool {
        writes_without_reading(
            self.cancel_open_steps,
            self.run_status,
            self.parent_batch_id,
        )
    }
}

/// Whether a change writes without reading first (see
/// [`RunChange::pipelines`]): the outcome path's test, and a group's, which
/// writes only such changes.
pub(super) fn writes_without_reading(
    cancel_open_steps: bool,
    run_status: RunStatus,
    parent_batch_id: Option<i64>,
) -> bool {
    !cancel_open_steps
        && run_status != RunStatus::Cancelled
        && !(run_status.is_terminal() && parent_batch_id.is_some())
}
