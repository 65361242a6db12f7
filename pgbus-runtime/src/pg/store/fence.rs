//! The fence of an ending, awaited first or pipelined with the writes that
//! assume it holds (see `end_attempt`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::change::{RunChange, StepRef};
use super::outcome::Ending;
use super::{PgStore, check_count};
use crate::context::SignalId;
use crate::engine::{AttemptResult, Gate};
use crate::error::Error;
use crate::pg::tx::Tx;
use crate::store::Claim;

impl PgStore {
    /// The fence of an ending, the signal its attempt consumed and `change`
    /// written. `pipelined`: all of it in one pipeline, one round trip where
    /// awaiting the fence first takes two; the writes assume the fence holds,
    /// and when it does not (a late completion, or a retried outcome whose
    /// first try committed) `MissedAfterWrites` says the transaction must be
    /// rolled back. Every statement is prepared before any is sent, so they go
    /// out in the order polled: the fence first.
    pub(super) async fn fence_and_apply(
        &self,
        tx: &Tx<'_>,
        e: &Attempt<'_>,
        change: &RunChange<'_>,
        step: &StepRef<'_>,
        pipelined: bool,
    ) -> Result<Fenced, Error> {
        let consume = async {
            match e.result.gate {
                Some(Gate::Signal { id, fresh: true }) => {
                    self.consume_signal(tx, id, e.claimed.step_id, e.now).await
                }
                _ => Ok(()),
            }
        };
        let fence = self.fence(
            tx,
            e.claimed,
            e.worker_id,
            e.plan,
            e.result,
            e.now,
            e.ending,
        );
        if pipelined {
            self.prepare_pipeline(tx, e.result).await?;
            let apply = self.apply_change(tx, change, step, e.actor, e.now);
            let (fenced, consumed, applied) = tokio::join!(biased; fence, consume, apply);
            let Some(fenced) = fenced? else {
                return Ok(Fenced::MissedAfterWrites);
            };
            consumed?;
            return Ok(Fenced::Held(fenced, applied?));
        }
        let Some(fenced) = fence.await? else {
            return Ok(Fenced::Missed);
        };
        consume.await?;
        let next_id = self.apply_change(tx, change, step, e.actor, e.now).await?;
        Ok(Fenced::Held(fenced, next_id))
    }

    /// The fence of an ending: the attempt's own claim (`end_attempt.sql`), or
    /// for the grace rule the unclaimed due row (`pause_undefined.sql`). The
    /// row it changed (`finished_at`, `kept_output`), or `None`.
    #[allow(clippy::too_many_arguments)] // one statement, its parts named
    async fn fence(
        &self,
        tx: &Tx<'_>,
        claimed: &Claim,
        worker_id: &str,
        plan: &crate::engine::Plan,
        result: &AttemptResult,
        now: DateTime<Utc>,
        ending: Ending<'_>,
    ) -> Result<Option<tokio_postgres::Row>, Error> {
        let error = result.error.as_ref();
        let causes = error.map(|e| Value::from(e.causes.clone()));
        if let Ending::Undefined { grace_ms, lost_ms } = ending {
            let fence = self.prep.in_tx(tx, &self.sql.pause_undefined).await?;
            return fence
                .query_opt(
                    tx,
                    &[
                        &claimed.step_id,
                        &claimed.attempt,
                        &plan.step_status.as_str(),
                        &plan.step_outcome.as_str(),
                        &error.map(|e| e.class.as_str()),
                        &error.map(|e| e.message.as_str()),
                        &causes,
                        &now,
                        &grace_ms,
                        &lost_ms,
                    ],
                )
                .await;
        }
        let fence = self.prep.in_tx(tx, &self.sql.end_attempt).await?;
        fence
            .query_opt(
                tx,
                &[
                    &claimed.step_id,
                    &claimed.attempt,
                    &worker_id,
                    &plan.step_status.as_str(),
                    &plan.step_outcome.as_str(),
                    &result.output,
                    &error.map(|e| e.class.as_str()),
                    &error.map(|e| e.message.as_str()),
                    &causes,
                    &now,
                ],
            )
            .await
    }

    /// Prepares every statement a pipelined ending of `change` sends, so that
    /// none waits on a prepare while a later one goes out.
    async fn prepare_pipeline(&self, tx: &Tx<'_>, result: &AttemptResult) -> Result<(), Error> {
        self.prep.in_tx(tx, &self.sql.end_attempt).await?;
        if matches!(result.gate, Some(Gate::Signal { fresh: true, .. })) {
            self.prep.in_tx(tx, &self.sql.consume_signal).await?;
        }
        for sql in [
            &self.sql.insert_events,
            &self.sql.insert_step,
            &self.sql.update_run,
            &self.sql.notify,
        ] {
            self.prep.in_tx(tx, sql).await?;
        }
        Ok(())
    }

    /// Records that attempt `step_id` consumed signal `id`.
    async fn consume_signal(
        &self,
        tx: &Tx<'_>,
        id: SignalId,
        step_id: i64,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let statement = self.prep.in_tx(tx, &self.sql.consume_signal).await?;
        let consumed = statement.execute(tx, &[&id.0, &step_id, &now]).await?;
        check_count("consume_signal", 1, i64::try_from(consumed).unwrap_or(0))
    }
}

/// What an ending fences and writes with: the attempt, its plan and result,
/// who ends it, and the time of the transition.
pub(super) struct Attempt<'a> {
    pub(super) claimed: &'a Claim,
    pub(super) worker_id: &'a str,
    pub(super) plan: &'a crate::engine::Plan,
    pub(super) result: &'a AttemptResult,
    pub(super) ending: Ending<'a>,
    pub(super) actor: &'a str,
    pub(super) now: DateTime<Utc>,
}

/// What [`PgStore::fence_and_apply`] found.
pub(super) enum Fenced {
    /// The fence held (its row), and the change was written (the id of the
    /// next step, when it was handed on).
    Held(tokio_postgres::Row, Option<i64>),
    /// The fence did not hold, and nothing was written.
    Missed,
    /// The fence did not hold, and the writes sent with it must be rolled
    /// back.
    MissedAfterWrites,
}

/// When an ending sends its fence.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Fence {
    /// In one pipeline with the writes that assume it holds, where the
    /// change allows ([`RunChange::pipelines`]); `None` from
    /// `end_attempt_in` when it did not hold, and the transaction must be
    /// rolled back.
    Pipelined,
    /// Alone, awaited before anything else is written.
    First,
}
