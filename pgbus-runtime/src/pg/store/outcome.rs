//! Ending a claimed attempt: fenced, planned with the run locked, and applied.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::change::{RunChange, StepRef};
use super::fence::{Attempt, Fence, Fenced};
use super::group::{self, Member, Reply};
use super::{PgStore, TX_ATTEMPTS, parse_stored, read_step_plan, retryable};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::{
    AttemptResult, AttemptState, RunOverrides, RunState, RunStatus, carries_over, continued_claim,
    handoff_within_limits, hands_off, past_deadline, plan_outcome, stall_event,
};
use crate::error::Error;
use crate::pg::tx::Tx;
use crate::store::{Claim, Ended, Handoff};

impl PgStore {
    /// Ends a claimed attempt: fences it, decides the plan with the run locked,
    /// applies it, and wakes workers if the next step is due now.
    /// `retrying`: an earlier try may have committed with its reply lost; if so,
    /// a failed fence is that try's own change, not a late completion.
    pub(crate) async fn end_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        retrying: bool,
        handoff: Option<Handoff<'_>>,
    ) -> Result<Ended, Error> {
        let mut end = AttemptEnd {
            definition,
            claimed,
            worker_id,
            result,
            now: self.clock.now(),
            ending: Ending::Outcome { retrying },
            handoff,
        };
        if let Some(groups) = &self.groups
            && group::takes(result, retrying)
        {
            let (member, replied) =
                Member::new(definition, claimed, worker_id, result, end.now, handoff);
            groups.submit(self, member);
            match replied.await {
                Ok(Reply::Ended(applied)) => return Ok(applied.ended(claimed, result)),
                Ok(Reply::Alone) => {}
                // As an outcome retried after a lost reply; so too when the
                // group's task is gone (the runtime stopping), which may have
                // written nothing.
                Ok(Reply::Unknown) | Err(_) => end.ending = Ending::Outcome { retrying: true },
            }
        }
        let mut client = self.pool.get().await?;
        // First with the fence pipelined with the writes; when the fence did
        // not hold, or Postgres asks for the transaction again, once more
        // with the fence first (and up to `TX_ATTEMPTS` times).
        let first = {
            let tx = Tx::begin(&mut client);
            match self.end_attempt_in(&tx, end, Fence::Pipelined).await {
                Ok(Attempted::Ended(ended)) => {
                    tx.commit().await.map(|()| Some(ended)).map_err(Error::from)
                }
                Ok(Attempted::Undo) => tx.rollback().await.map(|()| None).map_err(Error::from),
                Err(error) => {
                    let _ = tx.rollback().await;
                    Err(error)
                }
            }
        };
        match first {
            Ok(Some(ended)) => return Ok(ended),
            Err(Error::Database(db)) if retryable(&db) => {}
            Ok(None) => {}
            Err(error) => return Err(error),
        }
        in_tx!(@on client, |tx| self.end_attempt_in(&tx, end, Fence::First)).map(fenced_first)
    }

    /// Ends a stalled attempt for the sweep: fenced on the row's own claim, with a
    /// `stall_detected` event before the plan's; an attempt that ended meanwhile is
    /// left alone (no late-completion event: nothing was late).
    pub(crate) async fn sweep_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        detection: &str,
    ) -> Result<Ended, Error> {
        let now = self.clock.now();
        in_tx!(self.pool, |tx| self.end_attempt_in(
            &tx,
            AttemptEnd {
                definition,
                claimed,
                worker_id,
                result,
                now,
                ending: Ending::Sweep { detection },
                handoff: None,
            },
            Fence::First
        ))
        .map(fenced_first)
    }

    /// Ends a due row no live worker can run, for the sweep's grace rule:
    /// fenced on the row still unclaimed and due for longer than `grace_ms`,
    /// its run `ready`, and still no live worker (heartbeat within
    /// `lost_ms`) whose definition holds its step; `Late` when the fence
    /// fails, with nothing written.
    pub(crate) async fn pause_undefined(
        &self,
        step: &Claim,
        result: &AttemptResult,
        grace_ms: i64,
        lost_ms: i64,
    ) -> Result<Ended, Error> {
        let now = self.clock.now();
        in_tx!(self.pool, |tx| self.end_attempt_in(
            &tx,
            AttemptEnd {
                definition: &crate::__private::STAND_IN_DEFINITION,
                claimed: step,
                worker_id: "",
                result,
                now,
                ending: Ending::Undefined { grace_ms, lost_ms },
                handoff: None,
            },
            Fence::First
        ))
        .map(fenced_first)
    }

    pub(super) async fn end_attempt_in(
        &self,
        tx: &Tx<'_>,
        end: AttemptEnd<'_>,
        fence: Fence,
    ) -> Result<Attempted, Error> {
        let AttemptEnd {
            definition,
            claimed,
            worker_id,
            result,
            now,
            ending,
            handoff,
        } = end;
        let sweep = ending.detection();
        let Some(run) = self.lock_run(tx, claimed.run_id, now).await? else {
            // Deleted (retention) while the step ran: a late ending.
            return Ok(Attempted::Ended(Ended::Late));
        };
        let run_status = self.settle_ended(tx, claimed.run_id, &run).await?;
        if let (Some(park), Ending::Outcome { retrying }) = (&result.park, ending) {
            return self
                .park_in(tx, &run, claimed, worker_id, result, park, retrying, now)
                .await
                .map(Attempted::Ended);
        }
        let state = AttemptState {
            step_name: claimed.step_name.clone(),
            attempt: claimed.attempt,
            reattempts: claimed.reattempts,
        };
        let run_state = run_state_of(&run, run_status)?;
        let mut plan = plan_outcome(definition, &run_state, &state, result);
        // A retry never hands on: it cannot tell whether the try whose reply
        // was lost did (see `fenced_off`).
        let offered = handoff.is_some();
        let handoff = match handoff {
            Some(h) if matches!(ending, Ending::Outcome { retrying: false }) => {
                let on = carries_over(claimed, result)
                    && hands_on(
                        &run,
                        &run_state,
                        &plan,
                        &claimed.workflow,
                        h.queues,
                        definition,
                    )?;
                on.then_some(h)
            }
            _ => None,
        };
        if let Some(detection) = sweep {
            plan.events.insert(0, stall_event(detection));
        }

        let actor = match ending {
            Ending::Outcome { .. } => worker_id,
            Ending::Sweep { .. } | Ending::Undefined { .. } => "sweep",
        };
        // The time of the whole transition: the lock's reading of the store's
        // clock, taken once the lock was held.
        let db_now: DateTime<Utc> = run.get("now");
        let step = StepRef::of(claimed);
        let change = RunChange::of_outcome(
            claimed,
            run.get("parent_batch_id"),
            &plan,
            handoff.map(|h| (worker_id, h.stall_threshold_ms)),
        );
        let pipelined = fence == Fence::Pipelined
            && matches!(ending, Ending::Outcome { .. })
            && change.pipelines();
        let attempt = Attempt {
            claimed,
            worker_id,
            plan: &plan,
            result,
            ending,
            actor,
            now: db_now,
        };
        let (fenced, next_id) = match self
            .fence_and_apply(tx, &attempt, &change, &step, pipelined)
            .await?
        {
            Fenced::Held(fenced, next_id) => (fenced, next_id),
            Fenced::MissedAfterWrites => return Ok(Attempted::Undo),
            Fenced::Missed => {
                return self
                    .fenced_off(tx, claimed, worker_id, result, ending, now, offered)
                    .await
                    .map(|recorded| {
                        Attempted::Ended(if recorded {
                            Ended::Applied(Box::new(plan))
                        } else {
                            Ended::Late
                        })
                    });
            }
        };
        let kept_output: Option<Value> = fenced.get("kept_output");
        // A step id comes back only when `plan.next` was handed on.
        let (Some(next_id), Some(next)) = (next_id, plan.next.as_ref()) else {
            return Ok(Attempted::Ended(Ended::Applied(Box::new(plan))));
        };
        let continued = continued_claim(claimed, &plan, next, result, kept_output, next_id, db_now);
        Ok(Attempted::Ended(Ended::Continued(
            Box::new(plan),
            Box::new(continued),
        )))
    }

    /// The locked run's status. An ended run never changes again: should a
    /// step of it still be open (it must not be), this closes it, so the
    /// attempt's fence fails and its outcome is a late completion instead of
    /// moving the run.
    async fn settle_ended(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        run: &tokio_postgres::Row,
    ) -> Result<RunStatus, Error> {
        let status: RunStatus = parse_stored(&run.get::<_, String>("status"))?;
        if status.is_terminal() {
            let statement = self.prep.in_tx(tx, &self.sql.cancel_open_steps).await?;
            let now: DateTime<Utc> = run.get("now");
            statement.execute(tx, &[&run_id.0, &now]).await?;
        }
        Ok(status)
    }

    /// An attempt whose fence failed. For the sweep: ended meanwhile, nothing to
    /// do. For a retried outcome whose earlier try committed (its reply lost):
    /// `true`, already recorded. Otherwise a late completion, recorded as such.
    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    pub(super) async fn fenced_off(
        &self,
        tx: &Tx<'_>,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        ending: Ending<'_>,
        now: Option<DateTime<Utc>>,
        offered_handoff: bool,
    ) -> Result<bool, Error> {
        match ending {
            Ending::Sweep { .. } | Ending::Undefined { .. } => return Ok(false),
            Ending::Outcome { retrying: true } => {
                let statement = self.prep.in_tx(tx, &self.sql.outcome_recorded).await?;
                let recorded: bool = statement
                    .query_one(tx, &[&claimed.run_id.0, &claimed.step_id, &worker_id])
                    .await?
                    .get(0);
                if recorded {
                    if offered_handoff {
                        self.release_handoff(tx, claimed.run_id.0, claimed.step_id, worker_id)
                            .await?;
                    }
                    return Ok(true);
                }
            }
            Ending::Outcome { retrying: false } => {}
        }
        let statement = self.prep.in_tx(tx, &self.sql.late_completion).await?;
        let details = serde_json::json!({
            "verb": result.verb.stored(),
            "error": result.error.as_ref().map(|e| e.message.clone()),
        });
        statement
            .execute(
                tx,
                &[
                    &claimed.run_id.0,
                    &claimed.step_id,
                    &claimed.step_name,
                    &claimed.attempt,
                    &worker_id,
                    &details,
                    &now,
                ],
            )
            .await?;
        Ok(false)
    }

    /// Puts back in the queue the step the outcome of attempt `step_id` (of
    /// run `run_id`) handed to `worker_id`, which never learned of it (see
    /// `release_handoff.sql`), and wakes the workers of its queue.
    pub(super) async fn release_handoff(
        &self,
        tx: &Tx<'_>,
        run_id: i64,
        step_id: i64,
        worker_id: &str,
    ) -> Result<(), Error> {
        let statement = self.prep.in_tx(tx, &self.sql.release_handoff).await?;
        let released = statement
            .query_opt(tx, &[&run_id, &step_id, &worker_id])
            .await?;
        if let Some(row) = released {
            let queue: String = row.get("queue");
            let statement = self.prep.in_tx(tx, &self.sql.notify).await?;
            statement
                .query_one(tx, &[&self.schema.channel(), &queue])
                .await?;
        }
        Ok(())
    }
}

/// Whether an outcome's transaction hands the next step of `plan` on to
/// its worker (`handoff`): within the flow limits in force (see
/// `lock_run.sql`, read and dropped here: nothing of them is kept across an
/// await), as the engine decides, with what the claim carried, and before
/// the run's deadline (a run past it starts no step, as claim.sql). The
/// caller checks that what the claim carried carries over
/// (`engine::carries_over`). `run`: a `lock_run.sql` or `lock_runs.sql` row;
/// `queues`: the worker's.
pub(super) fn hands_on(
    run: &tokio_postgres::Row,
    run_state: &RunState,
    plan: &crate::engine::Plan,
    workflow: &str,
    queues: &[String],
    definition: &'static WorkflowDefinition,
) -> Result<bool, Error> {
    let Some(next) = &plan.next else {
        return Ok(false);
    };
    let keys: Vec<String> = run.try_get("flow_keys")?;
    Ok(handoff_within_limits(next, workflow, &keys)
        && hands_off(plan, run_state.step_plan.as_deref(), queues, definition)
        && !past_deadline(run.get("deadline_at"), run.get("now")))
}

/// The locked run (a `lock_run.sql` or `lock_runs.sql` row) as the engine
/// plans with it.
pub(super) fn run_state_of(
    run: &tokio_postgres::Row,
    status: RunStatus,
) -> Result<RunState, Error> {
    Ok(RunState {
        status,
        step_names: run.try_get("step_names")?,
        step_plan: read_step_plan(run),
        overrides: RunOverrides {
            queue: run.try_get("queue_override")?,
            priority: run.try_get("priority_override")?,
        },
    })
}

/// What an ending with [`Fence::First`] and no group gave, which is always
/// an ending.
fn fenced_first(attempted: Attempted) -> Ended {
    match attempted {
        Attempted::Ended(ended) => ended,
        // Only from a pipelined fence.
        Attempted::Undo => Ended::Late,
    }
}

/// An attempt's end as `end_attempt_in` takes it: the definition it is
/// planned with, the attempt, who ends it and with what, the pinned time (if
/// any), and the handoff its worker offers.
#[derive(Clone, Copy)]
pub(super) struct AttemptEnd<'a> {
    pub(super) definition: &'static WorkflowDefinition,
    pub(super) claimed: &'a Claim,
    pub(super) worker_id: &'a str,
    pub(super) result: &'a AttemptResult,
    pub(super) now: Option<DateTime<Utc>>,
    pub(super) ending: Ending<'a>,
    pub(super) handoff: Option<Handoff<'a>>,
}

/// What `end_attempt_in` did.
pub(super) enum Attempted {
    /// The attempt ended: commit.
    Ended(Ended),
    /// Writes went out behind a pipelined fence that did not hold: roll back.
    Undo,
}

/// Who ends an attempt.
#[derive(Clone, Copy)]
pub(super) enum Ending<'a> {
    /// The worker that ran it, possibly again after a try whose reply was lost.
    Outcome { retrying: bool },
    /// The sweep, which found it stalled.
    Sweep { detection: &'a str },
    /// The sweep's grace rule, for a due row no live worker can run (not an
    /// attempt anyone claimed).
    Undefined { grace_ms: i64, lost_ms: i64 },
}

impl<'a> Ending<'a> {
    /// How the sweep detected the stall it ends, when it is the sweep.
    fn detection(self) -> Option<&'a str> {
        match self {
            Ending::Sweep { detection } => Some(detection),
            Ending::Outcome { .. } | Ending::Undefined { .. } => None,
        }
    }
}
