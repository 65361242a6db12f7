//! The Postgres store: carries out the engine's decisions. Every transition runs
//! in one transaction under the run's row lock, every update is fenced and its row
//! count checked.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Pool, Transaction};
use serde_json::Value;
use tokio_postgres::error::SqlState;

use super::start::{PgStart, StartArgs, start_with};
use super::statement::{Caller, Prepared, Preparer, StatementMode};
use super::{Schema, Statements};
use crate::clock::Clock;
use crate::context::{RunId, SignalId};
use crate::definition::WorkflowDefinition;
use crate::engine::{
    Action, ActionRun, AttemptResult, AttemptState, BatchState, ErrorRecord, EventSpec, Gate,
    LatestStep, NewStep, Park, PlannedStep, RunState, RunStatus, StoredSignal, carries_over,
    continued_claim, first_attempt, hands_off, plan_action, plan_outcome, plan_park, stall_event,
};
use crate::error::Error;
use crate::fan_out::ChildRun;
use crate::pg::cancel::Guarded;
use crate::store::{Claim, Ended, Handoff, Parked};

/// How many times a transaction is tried when Postgres reports a serialization
/// failure or a deadlock.
const TX_ATTEMPTS: u32 = 3;

/// Runs `$body` (a future borrowing `$tx`) in a transaction: commits on `Ok`,
/// rolls back on `Err`, and tries again, up to [`TX_ATTEMPTS`] times, when
/// Postgres reports a serialization failure or a deadlock. A macro rather than a
/// function taking an async closure: the futures it builds must stay `Send`.
macro_rules! in_tx {
    ($pool:expr, |$tx:ident| $body:expr) => {{
        let mut client = $pool.get().await?;
        in_tx!(@on client, |$tx| $body)
    }};
    (@on $client:ident, |$tx:ident| $body:expr) => {{
        let client = &mut *$client;
        let mut tries = 0;
        loop {
            tries += 1;
            let $tx = client.transaction().await?;
            let result = match $body.await {
                Ok(value) => $tx.commit().await.map(|()| value).map_err(Error::from),
                // Roll back now, not on drop: a dropped transaction only queues
                // its ROLLBACK, and until the connection sends it the locks it
                // took (a refused action's run lock) make claims skip the run.
                // If the rollback fails the connection is gone, and with it the
                // transaction.
                Err(error) => {
                    let _ = $tx.rollback().await;
                    Err(error)
                }
            };
            match result {
                Err(Error::Database(db)) if tries < TX_ATTEMPTS && retryable(&db) => {}
                other => break other,
            }
        }
    }};
}

/// The Postgres store: pool, schema, rendered statements and clock, everything
/// a client or worker needs to talk to one pgbus schema. Implements
/// [`Store`](crate::store::Store); from [`Database::store`](crate::Database::store).
#[derive(Clone, Debug)]
pub struct PgStore {
    pub(crate) pool: Pool,
    /// How statements are sent, and the parameter types learned so far.
    pub(crate) prep: Preparer,
    pub(crate) schema: Schema,
    pub(crate) sql: Arc<Statements>,
    pub(crate) clock: Clock,
    /// How the pool's connections were opened (`None` for a pool handed in
    /// alone): what an operator's abandoned statement is cancelled through.
    pub(crate) connector: Option<Arc<crate::connection::Connector>>,
    /// The sizes of inputs and signal payloads accepted.
    pub(crate) limits: crate::context::Limits,
}

/// The step columns of a claim or sweep row as a claim; no input or outputs
/// (the sweep needs none, the claim fills them in).
fn claim_of_step_row(row: &tokio_postgres::Row) -> Claim {
    Claim {
        step_id: row.get("id"),
        reattempts: row.get("reattempts"),
        scheduled_at: row.get("scheduled_at"),
        timeout_ms: row.get("timeout_ms"),
        ..Claim::new(
            RunId(row.get("run_id")),
            row.get::<_, String>("workflow"),
            row.get::<_, String>("step_name"),
            row.get("attempt"),
            row.get("started_at"),
        )
    }
}

impl PgStore {
    pub(crate) fn new(pool: Pool, schema: Schema, clock: Clock, mode: StatementMode) -> Self {
        let sql = Arc::new(Statements::new(&schema));
        Self {
            pool,
            prep: Preparer::new(mode),
            schema,
            sql,
            clock,
            connector: None,
            limits: crate::context::Limits::default(),
        }
    }

    /// A connection whose statement in flight is cancelled if the caller
    /// gives up before [`Guarded::finish`]: for operator reads and actions.
    pub(crate) async fn guarded(&self) -> Result<Guarded, Error> {
        Guarded::get(&self.pool, self.connector.as_deref()).await
    }

    /// Starts a run of `definition` with `input`; with a key, returns the run an
    /// earlier start with that key created instead. `(run, created)`. See
    /// [`start_with`] for what a key does.
    pub(crate) async fn start_run(
        &self,
        definition: &'static WorkflowDefinition,
        input: &Value,
        key: Option<&str>,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, key)?;
        let mut client = self.pool.get().await?;
        let insert = self.prep.on(&mut client, &self.sql.start_run).await?;
        let find = self.prep.on(&mut client, &self.sql.find_run_by_key).await?;
        start_with(
            &mut PgStart {
                conn: &client,
                insert,
                find,
            },
            &args,
        )
        .await
    }

    /// As [`PgStore::start_run`], on a caller's client or transaction: both
    /// statements unnamed (the caller's connection has no statement cache of
    /// ours and may sit behind a pooler), so nothing is left prepared on it.
    pub(crate) async fn start_run_on<C: tokio_postgres::GenericClient + Sync>(
        &self,
        caller: &C,
        definition: &'static WorkflowDefinition,
        input: &Value,
        key: Option<&str>,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, key)?;
        let insert = self.prep.unnamed(&self.pool, &self.sql.start_run).await?;
        let find = self
            .prep
            .unnamed(&self.pool, &self.sql.find_run_by_key)
            .await?;
        start_with(
            &mut PgStart {
                conn: &Caller(caller),
                insert,
                find,
            },
            &args,
        )
        .await
    }

    /// As [`PgStore::start_run_on`], on a caller's sqlx connection.
    #[cfg(feature = "sqlx")]
    pub(crate) async fn start_run_sqlx(
        &self,
        conn: &mut sqlx::PgConnection,
        definition: &'static WorkflowDefinition,
        input: &Value,
        key: Option<&str>,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, key)?;
        start_with(
            &mut super::start::SqlxStart {
                conn,
                sql: &self.sql,
            },
            &args,
        )
        .await
    }

    /// The parameters of a start of `definition` on this store.
    pub(crate) fn start_args<'a>(
        &self,
        definition: &'static WorkflowDefinition,
        input: &'a Value,
        key: Option<&'a str>,
    ) -> Result<StartArgs<'a>, Error> {
        StartArgs::new(
            definition,
            input,
            key,
            self.clock.now(),
            self.schema.channel(),
        )
    }

    /// Claims up to `limit` due steps.
    pub(crate) async fn claim(
        &self,
        queues: &[String],
        workflows: &[String],
        limit: i64,
        worker_id: &str,
        stall_threshold_ms: i64,
    ) -> Result<Vec<Claim>, Error> {
        let now = self.clock.now();
        in_tx!(self.pool, |tx| self.claim_in(
            &tx,
            queues,
            workflows,
            limit,
            worker_id,
            stall_threshold_ms,
            now
        ))
    }

    #[allow(clippy::too_many_arguments)]
    async fn claim_in(
        &self,
        tx: &Transaction<'_>,
        queues: &[String],
        workflows: &[String],
        limit: i64,
        worker_id: &str,
        stall_threshold_ms: i64,
        now: Option<DateTime<Utc>>,
    ) -> Result<Vec<Claim>, Error> {
        let statement = self.prep.in_tx(tx, &self.sql.claim).await?;
        let rows = statement
            .query(
                tx,
                &[
                    &queues,
                    &workflows,
                    &limit,
                    &worker_id,
                    &stall_threshold_ms,
                    &now,
                ],
            )
            .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        let mut gated = Vec::new();
        for row in &rows {
            let claimed_rows: i64 = row.get("claimed_rows");
            check_count("claim: runs moved", claimed_rows, row.get("moved_rows"))?;
            check_count(
                "claim: step_started events",
                claimed_rows,
                row.get("event_rows"),
            )?;
            // JSON Postgres stored but the driver cannot read back (nested deeper
            // than serde_json's limit): hand the attempt a note instead of
            // panicking, and the executor fails it for the policies.
            let (input, outputs, unreadable) = match (
                row.try_get::<_, Value>("input"),
                row.try_get::<_, Value>("outputs"),
            ) {
                (Ok(input), Ok(outputs)) => (input, outputs, None),
                (Err(error), _) | (_, Err(error)) => (
                    Value::Null,
                    Value::Null,
                    Some(crate::error::display_chain(&error)),
                ),
            };
            let wait_name: Option<String> = row.get("wait_name");
            if wait_name.is_some() || row.get::<_, bool>("has_batches") {
                gated.push((row.get::<_, i64>("id"), wait_name));
            }
            claimed.push(Claim {
                input,
                unreadable,
                outputs: match outputs {
                    Value::Object(map) => map.into_iter().collect(),
                    _ => BTreeMap::new(),
                },
                waiting_since: row.get("waiting_since"),
                ..claim_of_step_row(row)
            });
        }
        if !gated.is_empty() {
            self.gate_inputs(tx, &gated, &mut claimed).await?;
        }
        if i64::try_from(claimed.len()).unwrap_or(i64::MAX) > limit {
            return Err(Error::RowCount {
                statement: "claim: limit",
                expected: u64::try_from(limit).unwrap_or(0),
                found: claimed.len() as u64,
            });
        }
        Ok(claimed)
    }

    /// Fills in what the gates of `gated` (claimed step ids with the signal name
    /// each waits for) read, in a statement of the claim's transaction after
    /// the one that took the locks (see `gate_inputs.sql` for why).
    async fn gate_inputs(
        &self,
        tx: &Transaction<'_>,
        gated: &[(i64, Option<String>)],
        claimed: &mut [Claim],
    ) -> Result<(), Error> {
        let ids: Vec<i64> = gated.iter().map(|(id, _)| *id).collect();
        let names: Vec<Option<&str>> = gated.iter().map(|(_, name)| name.as_deref()).collect();
        let statement = self.prep.in_tx(tx, &self.sql.gate_inputs).await?;
        for row in statement.query(tx, &[&ids, &names]).await? {
            let id: i64 = row.get("id");
            let Some(claim) = claimed.iter_mut().find(|c| c.step_id == id) else {
                continue;
            };
            claim.timed_out_before = row.get("timed_out_before");
            // Signals whose payload the driver cannot read back fail the
            // attempt for the policies as an unreadable input does.
            match gate_columns(&row) {
                Ok((signals, batch)) => {
                    claim.signals = signals;
                    claim.batch = batch;
                }
                Err(error) => {
                    claim.unreadable = Some(crate::error::display_chain(&error));
                }
            }
        }
        Ok(())
    }

    /// Milliseconds until the next scheduled step of these queues and workflows
    /// is due, if one is scheduled.
    pub(crate) async fn next_due_ms(
        &self,
        queues: &[String],
        workflows: &[String],
    ) -> Result<Option<i64>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.next_due).await?;
        let row = statement
            .query_one(&client, &[&queues, &workflows, &self.clock.now()])
            .await?;
        Ok(row.get(0))
    }

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
        in_tx!(self.pool, |tx| self.end_attempt_in(
            &tx, definition, claimed, worker_id, result, now, ending, handoff
        ))
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
            None
        ))
    }

    /// Attempts the sweep should repair: in progress past their `stall_at`
    /// (`timeout`), or claimed by a worker whose row is gone or whose heartbeat is
    /// older than `lost_ms` (`worker_lost`). `(claim, worker id, detection)`.
    pub(crate) async fn stalled(
        &self,
        lost_ms: i64,
        limit: i64,
    ) -> Result<Vec<(Claim, String, String)>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.stalled).await?;
        let rows = statement
            .query(&client, &[&self.clock.now(), &lost_ms, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    claim_of_step_row(row),
                    row.get("worker_id"),
                    row.get("detection"),
                )
            })
            .collect())
    }

    /// Refreshes a worker's heartbeat. Returns whether its row was there, which
    /// of `running` (step ids) lost their claim, and which attempts in progress
    /// under this worker `running` lacks.
    pub(crate) async fn heartbeat(&self, id: &str, running: &[i64]) -> Result<Heartbeat, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.heartbeat).await?;
        let row = statement
            .query_one(&client, &[&id, &self.clock.now(), &running])
            .await?;
        Ok(Heartbeat {
            present: row.get::<_, i64>("beats") > 0,
            lost: row.get("lost"),
            orphans: row.get("orphans"),
        })
    }

    /// Makes attempts a worker holds but lost track of due for the sweep now.
    /// Returns how many.
    pub(crate) async fn release_orphans(&self, id: &str, orphans: &[i64]) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.release_orphans).await?;
        statement
            .execute(&client, &[&id, &orphans, &self.clock.now()])
            .await
    }

    /// Deletes up to `batch` finished or cancelled runs older than `retention_ms`;
    /// returns how many.
    pub(crate) async fn delete_expired_runs(
        &self,
        retention_ms: i64,
        batch: i64,
    ) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self
            .prep
            .on(&mut client, &self.sql.delete_expired_runs)
            .await?;
        statement
            .execute(&client, &[&self.clock.now(), &retention_ms, &batch])
            .await
    }

    /// Deletes the row of worker `id` and of every worker silent for longer than
    /// `silent_ms` (each if given); returns how many.
    pub(crate) async fn delete_workers(
        &self,
        id: Option<&str>,
        silent_ms: Option<i64>,
    ) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.delete_worker).await?;
        statement
            .execute(&client, &[&id, &self.clock.now(), &silent_ms])
            .await
    }

    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    async fn end_attempt_in(
        &self,
        tx: &Transaction<'_>,
        definition: &'static WorkflowDefinition,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        now: Option<DateTime<Utc>>,
        ending: Ending<'_>,
        handoff: Option<Handoff<'_>>,
    ) -> Result<Ended, Error> {
        let sweep = match ending {
            Ending::Sweep { detection } => Some(detection),
            Ending::Outcome { .. } => None,
        };
        let Some(run) = self.lock_run(tx, claimed.run_id, now).await? else {
            // The run was deleted (retention) while the step ran.
            return Ok(Ended::Late);
        };
        let run_status = self.settle_ended(tx, claimed.run_id, &run).await?;
        if let (Some(park), Ending::Outcome { retrying }) = (&result.park, ending) {
            return self
                .park_in(tx, &run, claimed, worker_id, result, park, retrying, now)
                .await;
        }
        let step_names: Option<Vec<String>> = run.get("step_names");
        let step_plan = read_step_plan(&run);
        let state = AttemptState {
            step_name: claimed.step_name.clone(),
            attempt: claimed.attempt,
            reattempts: claimed.reattempts,
        };
        let run_state = RunState {
            status: run_status,
            step_names,
            step_plan,
        };
        let mut plan = plan_outcome(definition, &run_state, &state, result);
        // A retry never hands on: it cannot tell whether the try whose reply
        // was lost did (see `fenced_off`).
        let offered = handoff.is_some();
        let handoff = handoff.filter(|h| {
            matches!(ending, Ending::Outcome { retrying: false })
                && hands_off(&plan, run_state.step_plan.as_deref(), h.queues)
                && carries_over(claimed, result)
        });
        if let Some(detection) = sweep {
            plan.events.insert(0, stall_event(detection));
        }

        let error = result.error.as_ref();
        let causes = error.map(|e| Value::from(e.causes.clone()));
        let fence = self.prep.in_tx(tx, &self.sql.end_attempt).await?;
        let fenced = fence
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
            .await?;
        // The fence's `finished_at` is the time the whole transition uses: one
        // reading of the store's clock, no extra round trip.
        let Some(fenced) = fenced else {
            return self
                .fenced_off(tx, claimed, worker_id, result, ending, now, offered)
                .await
                .map(|recorded| {
                    if recorded {
                        Ended::Applied(Box::new(plan))
                    } else {
                        Ended::Late
                    }
                });
        };
        let db_now: DateTime<Utc> = fenced.get(0);
        let kept_output: Option<Value> = fenced.get("kept_output");

        let actor = if sweep.is_some() { "sweep" } else { worker_id };
        if let Some(Gate::Signal { id, fresh: true }) = result.gate {
            self.consume_signal(tx, id, claimed.step_id, db_now).await?;
        }
        let step = StepRef {
            id: claimed.step_id,
            name: &claimed.step_name,
            attempt: claimed.attempt,
        };
        let change = RunChange {
            run_id: claimed.run_id.0,
            parent_batch_id: run.get("parent_batch_id"),
            workflow: &claimed.workflow,
            cancel_open_steps: plan.cancel_open_steps,
            next: plan.next.as_ref(),
            run_status: plan.run_status,
            current_step: plan.current_step.as_deref(),
            run_error: plan.run_error.as_ref(),
            events: &plan.events,
            claim_next: handoff.map(|h| (worker_id, h.stall_threshold_ms)),
        };
        let next_id = self.apply_change(tx, &change, &step, actor, db_now).await?;
        // A step id comes back only when `plan.next` was handed on.
        let (Some(next_id), Some(next)) = (next_id, plan.next.as_ref()) else {
            return Ok(Ended::Applied(Box::new(plan)));
        };
        let continued = continued_claim(claimed, &plan, next, result, kept_output, next_id, db_now);
        Ok(Ended::Continued(Box::new(plan), Box::new(continued)))
    }

    /// The locked run's status. An ended run never changes again: should a
    /// step of it still be open (it must not be), this closes it, so the
    /// attempt's fence fails and its outcome is a late completion instead of
    /// moving the run.
    async fn settle_ended(
        &self,
        tx: &Transaction<'_>,
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

    /// Records that attempt `step_id` consumed signal `id`.
    async fn consume_signal(
        &self,
        tx: &Transaction<'_>,
        id: SignalId,
        step_id: i64,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let statement = self.prep.in_tx(tx, &self.sql.consume_signal).await?;
        let consumed = statement.execute(tx, &[&id.0, &step_id, &now]).await?;
        check_count("consume_signal", 1, i64::try_from(consumed).unwrap_or(0))
    }

    /// Locks run `run_id` (its fan_out parent first, see `lock_run.sql`) and
    /// returns its row; `None` when it does not exist.
    async fn lock_run(
        &self,
        tx: &Transaction<'_>,
        run_id: RunId,
        now: Option<DateTime<Utc>>,
    ) -> Result<Option<tokio_postgres::Row>, Error> {
        let lock = self.prep.in_tx(tx, &self.sql.lock_run).await?;
        let rows = lock.query(tx, &[&run_id.0, &now]).await?;
        Ok(rows
            .into_iter()
            .find(|row| row.get::<_, i64>("id") == run_id.0))
    }

    /// Parks a claimed attempt as `waiting` (the run is locked): fenced as an
    /// outcome is; for a new batch, creates it with its children.
    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    async fn park_in(
        &self,
        tx: &Transaction<'_>,
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
        let step = StepRef {
            id: claimed.step_id,
            name: &claimed.step_name,
            attempt: claimed.attempt,
        };
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
        tx: &Transaction<'_>,
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
                ],
            )
            .await?;
        let total = i64::try_from(children.len()).unwrap_or(i64::MAX);
        check_count("start_children: runs", total, row.get("runs"))?;
        check_count("start_children: steps", total, row.get("steps"))?;
        check_count("start_children: events", total, row.get("events"))?;
        Ok((row.get("batch_id"), total))
    }

    /// For the sweep: resolves up to `limit` open batches whose children all
    /// ended, waking their parents' parked steps. Returns how many.
    /// Runs per status, for the statuses that are not an end (ready,
    /// performing, paused); statuses without runs are absent.
    pub(crate) async fn run_status_counts(&self) -> Result<Vec<(String, i64)>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self
            .prep
            .on(&mut client, &self.sql.run_status_counts)
            .await?;
        Ok(statement
            .query(&client, &[])
            .await?
            .iter()
            .map(|row| (row.get("status"), row.get("runs")))
            .collect())
    }

    pub(crate) async fn resolve_batches(&self, limit: i64) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.resolve_batches).await?;
        let row = statement
            .query_one(
                &client,
                &[&self.clock.now(), &limit, &self.schema.channel()],
            )
            .await?;
        Ok(u64::try_from(row.get::<_, i64>("resolved")).unwrap_or(0))
    }

    /// Delivers a signal (already checked) to a run that has not ended, waking
    /// the steps waiting for it.
    pub(crate) async fn signal(
        &self,
        run_id: RunId,
        name: &str,
        payload: &Value,
    ) -> Result<SignalId, Error> {
        let now = self.clock.now();
        in_tx!(self.pool, |tx| self
            .signal_in(&tx, run_id, name, payload, now))
    }

    async fn signal_in(
        &self,
        tx: &Transaction<'_>,
        run_id: RunId,
        name: &str,
        payload: &Value,
        now: Option<DateTime<Utc>>,
    ) -> Result<SignalId, Error> {
        // The run's lock first, in a statement of its own, so the send reads
        // what an attempt parking meanwhile committed (lock_signalled_run.sql).
        let lock = self.prep.in_tx(tx, &self.sql.lock_signalled_run).await?;
        if lock.query_opt(tx, &[&run_id.0]).await?.is_none() {
            return Err(Error::RunNotFound { run_id });
        }
        let statement = self.prep.in_tx(tx, &self.sql.send_signal).await?;
        let row = statement
            .query_one(
                tx,
                &[&run_id.0, &name, payload, &now, &self.schema.channel()],
            )
            .await?;
        let Some(status) = row.get::<_, Option<String>>("status") else {
            return Err(Error::RunNotFound { run_id });
        };
        match row.get::<_, Option<i64>>("signal_id") {
            Some(id) => {
                check_count("send_signal: event", 1, row.get("events"))?;
                Ok(SignalId(id))
            }
            None => Err(Error::RunEnded {
                run_id,
                status: parse_stored(&status)?,
            }),
        }
    }

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
        tx: &Transaction<'_>,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
        now: Option<DateTime<Utc>>,
    ) -> Result<RunStatus, Error> {
        let Some(run) = self.lock_run(tx, run_id, now).await? else {
            return Err(Error::RunNotFound { run_id });
        };
        let db_now: DateTime<Utc> = run.get("now");
        let workflow: String = run.get("workflow");
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
        let state = ActionRun {
            status: parse_stored(&run.get::<_, String>("status"))?,
            current_step: run.get("current_step"),
            step_plan: read_step_plan(&run),
            latest,
        };
        let plan = plan_action(action, &state, reason).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
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
        Ok(plan.run_status)
    }

    /// An attempt whose fence failed. For the sweep: ended meanwhile, nothing to
    /// do. For a retried outcome whose earlier try committed (its reply lost):
    /// `true`, already recorded. Otherwise a late completion, recorded as such.
    #[allow(clippy::too_many_arguments)] // one transaction, its parts named
    async fn fenced_off(
        &self,
        tx: &Transaction<'_>,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        ending: Ending<'_>,
        now: Option<DateTime<Utc>>,
        offered_handoff: bool,
    ) -> Result<bool, Error> {
        match ending {
            Ending::Sweep { .. } => return Ok(false),
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
            "verb": format!("{:?}", result.verb),
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
        tx: &Transaction<'_>,
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

    async fn apply_change(
        &self,
        tx: &Transaction<'_>,
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
        tx: &Transaction<'_>,
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

    /// What a run's end changes for fan-out: a cancelled run's open children
    /// (and theirs) are cancelled; a child counts toward its batch.
    async fn fan_out_changes(
        &self,
        tx: &Transaction<'_>,
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

    /// Records a worker row.
    pub(crate) async fn register_worker(
        &self,
        id: &str,
        host: &str,
        pid: i32,
        queues: &[String],
    ) -> Result<(), Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.register_worker).await?;
        statement
            .execute(&client, &[&id, &host, &pid, &queues, &self.clock.now()])
            .await?;
        Ok(())
    }
}

/// What a heartbeat learned.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    /// The worker row was there.
    pub(crate) present: bool,
    /// Attempts it runs whose claim is gone.
    pub(crate) lost: Vec<i64>,
    /// Attempts in progress under its id that it does not run.
    pub(crate) orphans: Vec<i64>,
}

/// Who ends an attempt.
#[derive(Clone, Copy)]
enum Ending<'a> {
    /// The worker that ran it, possibly again after a try whose reply was lost.
    Outcome { retrying: bool },
    /// The sweep, which found it stalled.
    Sweep { detection: &'a str },
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
struct StepRef<'a> {
    id: i64,
    name: &'a str,
    attempt: i32,
}

/// The run-level changes of an outcome plan or an action plan.
struct RunChange<'a> {
    run_id: i64,
    /// For a fan_out child: its batch, which its end counts toward.
    parent_batch_id: Option<i64>,
    workflow: &'a str,
    cancel_open_steps: bool,
    next: Option<&'a NewStep>,
    run_status: RunStatus,
    current_step: Option<&'a str>,
    run_error: Option<&'a ErrorRecord>,
    events: &'a [EventSpec],
    /// Claim `next` for this worker id, with this stall threshold (ms),
    /// instead of scheduling it (see [`Handoff`]).
    claim_next: Option<(&'a str, i64)>,
}

/// The gate's columns of a claim row: the signals a `wait_for` step may take and
/// a parked fan_out attempt's batch.
fn gate_columns(
    row: &tokio_postgres::Row,
) -> Result<(Vec<StoredSignal>, Option<BatchState>), Error> {
    #[derive(serde::Deserialize)]
    struct SignalRow {
        id: i64,
        name: String,
        payload: Value,
        taken_before: bool,
    }
    #[derive(serde::Deserialize)]
    struct BatchRow {
        id: i64,
        total: i32,
        finished: i32,
        cancelled: i32,
        open: bool,
        own: bool,
        output: Option<Value>,
    }
    let corrupt = |e: serde_json::Error| Error::Corrupt(format!("claim: {e}"));
    let signals: Vec<SignalRow> = row
        .try_get::<_, Option<Value>>("signals")
        .map_err(|e| Error::Corrupt(format!("claim: {}", crate::error::display_chain(&e))))?
        .map(serde_json::from_value)
        .transpose()
        .map_err(corrupt)?
        .unwrap_or_default();
    let batch: Option<BatchRow> = row
        .get::<_, Option<Value>>("batch")
        .map(serde_json::from_value)
        .transpose()
        .map_err(corrupt)?;
    Ok((
        signals
            .into_iter()
            .map(|s| StoredSignal {
                id: crate::SignalId(s.id),
                name: s.name,
                payload: s.payload,
                taken_before: s.taken_before,
            })
            .collect(),
        batch.map(|b| BatchState {
            id: b.id,
            total: b.total,
            finished: b.finished,
            cancelled: b.cancelled,
            open: b.open,
            own: b.own,
            output: b.output,
        }),
    ))
}

/// The run's recorded step plan; a value this version cannot read counts as none
/// (operator actions that need it then refuse, rather than guess).
fn read_step_plan(row: &tokio_postgres::Row) -> Option<Vec<PlannedStep>> {
    row.try_get::<_, Option<Value>>("step_plan")
        .ok()
        .flatten()
        .and_then(|value| serde_json::from_value(value).ok())
}

/// A status string as its enum; one this version does not know is corrupt data.
pub(crate) fn parse_stored<T: std::str::FromStr<Err = crate::engine::UnknownStatus>>(
    text: &str,
) -> Result<T, Error> {
    text.parse().map_err(|e| Error::Corrupt(format!("{e}")))
}

fn retryable(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Milliseconds as Postgres `bigint`.
fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn check_count(statement: &'static str, expected: i64, found: i64) -> Result<(), Error> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::RowCount {
            statement,
            expected: u64::try_from(expected).unwrap_or(0),
            found: u64::try_from(found).unwrap_or(0),
        })
    }
}

mod contract;
#[cfg(test)]
mod tests;
