//! Ending a claimed attempt: fenced, planned with the run locked, and applied.

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{PgStore, TX_ATTEMPTS, check_count, ms, parse_stored, read_step_plan, retryable};
use crate::context::{RunId, SignalId};
use crate::definition::WorkflowDefinition;
use crate::engine::{
    AttemptResult, AttemptState, ErrorRecord, EventSpec, Gate, NewStep, RunOverrides, RunState,
    RunStatus, carries_over, continued_claim, handoff_within_limits, hands_off, past_deadline,
    plan_outcome, stall_event,
};
use crate::error::Error;
use crate::pg::statement::Prepared;
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
        let now = self.clock.now();
        let ending = Ending::Outcome { retrying };
        let mut client = self.pool.get().await?;
        // First with the fence pipelined with the writes; when the fence did
        // not hold, or Postgres asks for the transaction again, once more
        // with the fence first (and up to `TX_ATTEMPTS` times).
        let first = {
            let tx = Tx::begin(&mut client);
            match self
                .end_attempt_in(
                    &tx,
                    definition,
                    claimed,
                    worker_id,
                    result,
                    now,
                    ending,
                    handoff,
                    Fence::Pipelined,
                )
                .await
            {
                Ok(Some(ended)) => tx.commit().await.map(|()| Some(ended)).map_err(Error::from),
                Ok(None) => tx.rollback().await.map(|()| None).map_err(Error::from),
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
        in_tx!(@on client, |tx| self.end_attempt_in(
            &tx,
            definition,
            claimed,
            worker_id,
            result,
            now,
            ending,
            handoff,
            Fence::First
        ))
        .map(fenced_first)
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
            definition,
            claimed,
            worker_id,
            result,
            now,
            Ending::Sweep { detection },
            None,
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
            &crate::__private::STAND_IN_DEFINITION,
            step,
            "",
            result,
            now,
            Ending::Undefined { grace_ms, lost_ms },
            None,
            Fence::First
        ))
        .map(fenced_first)
    }

    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    async fn end_attempt_in(
        &self,
        tx: &Tx<'_>,
        definition: &'static WorkflowDefinition,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        now: Option<DateTime<Utc>>,
        ending: Ending<'_>,
        handoff: Option<Handoff<'_>>,
        fence: Fence,
    ) -> Result<Option<Ended>, Error> {
        let sweep = match ending {
            Ending::Sweep { detection } => Some(detection),
            Ending::Outcome { .. } | Ending::Undefined { .. } => None,
        };
        let Some(run) = self.lock_run(tx, claimed.run_id, now).await? else {
            // The run was deleted (retention) while the step ran.
            return Ok(Some(Ended::Late));
        };
        let run_status = self.settle_ended(tx, claimed.run_id, &run).await?;
        if let (Some(park), Ending::Outcome { retrying }) = (&result.park, ending) {
            return self
                .park_in(tx, &run, claimed, worker_id, result, park, retrying, now)
                .await
                .map(Some);
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
        // The flow limits in force (see `lock_run.sql`), read and dropped
        // here: nothing of them is kept across the awaits below.
        let within_limits = match &plan.next {
            Some(next) => {
                let keys: Vec<String> = run.try_get("flow_keys")?;
                handoff_within_limits(next, &claimed.workflow, &keys)
            }
            None => false,
        };
        let handoff = handoff.filter(|h| {
            matches!(ending, Ending::Outcome { retrying: false })
                && within_limits
                && hands_off(&plan, run_state.step_plan.as_deref(), h.queues, definition)
                && carries_over(claimed, result)
                // A run past its deadline starts no step (as claim.sql).
                && !past_deadline(run.get("deadline_at"), run.get("now"))
        });
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
        let step = StepRef {
            id: claimed.step_id,
            name: &claimed.step_name,
            attempt: claimed.attempt,
        };
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
            Fenced::MissedAfterWrites => return Ok(None),
            Fenced::Missed => {
                return self
                    .fenced_off(tx, claimed, worker_id, result, ending, now, offered)
                    .await
                    .map(|recorded| {
                        Some(if recorded {
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
            return Ok(Some(Ended::Applied(Box::new(plan))));
        };
        let continued = continued_claim(claimed, &plan, next, result, kept_output, next_id, db_now);
        Ok(Some(Ended::Continued(Box::new(plan), Box::new(continued))))
    }

    /// The fence of an ending, the signal its attempt consumed and `change`
    /// written. `pipelined`: all of it in one pipeline, one round trip where
    /// awaiting the fence first takes two; the writes assume the fence holds,
    /// and when it does not (a late completion, or a retried outcome whose
    /// first try committed) `MissedAfterWrites` says the transaction must be
    /// rolled back. Every statement is prepared before any is sent, so they go
    /// out in the order polled: the fence first.
    async fn fence_and_apply(
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
                        self.release_handoff(tx, claimed, worker_id).await?;
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

    /// Puts back in the queue the step an earlier try of this outcome handed
    /// to `worker_id` and whose reply was lost (see `release_handoff.sql`),
    /// and wakes the workers of its queue.
    async fn release_handoff(
        &self,
        tx: &Tx<'_>,
        claimed: &Claim,
        worker_id: &str,
    ) -> Result<(), Error> {
        let statement = self.prep.in_tx(tx, &self.sql.release_handoff).await?;
        let released = statement
            .query_opt(tx, &[&claimed.run_id.0, &claimed.step_id, &worker_id])
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

/// The locked run (a `lock_run.sql` row) as the engine plans with it.
fn run_state_of(run: &tokio_postgres::Row, status: RunStatus) -> Result<RunState, Error> {
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

/// What an ending fences and writes with: the attempt, its plan and result,
/// who ends it, and the time of the transition.
pub(super) struct Attempt<'a> {
    claimed: &'a Claim,
    worker_id: &'a str,
    plan: &'a crate::engine::Plan,
    result: &'a AttemptResult,
    ending: Ending<'a>,
    actor: &'a str,
    now: DateTime<Utc>,
}

/// What [`PgStore::fence_and_apply`] found.
enum Fenced {
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

/// What an ending with [`Fence::First`] gave, which is always an ending.
#[allow(clippy::unnecessary_wraps)] // the shape `end_attempt_in` returns
fn fenced_first(ended: Option<Ended>) -> Ended {
    // `None` comes only from a pipelined fence that did not hold.
    ended.unwrap_or(Ended::Late)
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

/// A change's events as the columns `insert_events.sql` takes.
struct EventRows {
    step_ids: Vec<Option<i64>>,
    step_names: Vec<Option<String>>,
    attempts: Vec<Option<i32>>,
    events: Vec<&'static str>,
    reasons: Vec<Option<String>>,
    details: Vec<Option<Value>>,
}

impl EventRows {
    /// `events`, those about a step filled in with `step`.
    fn of(events: &[EventSpec], step: &StepRef<'_>) -> Self {
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
    fn of_outcome(
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
    fn pipelines(&self) -> bool {
        !self.cancel_open_steps
            && self.run_status != RunStatus::Cancelled
            && !(self.run_status.is_terminal() && self.parent_batch_id.is_some())
    }
}
