//! Claiming due steps, with what their gates read.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::flow::HeldBack;
use super::{PgStore, TX_ATTEMPTS, check_count, retryable};
use crate::context::RunId;
use crate::engine::{BatchState, StoredSignal};
use crate::error::Error;
use crate::store::{Claim, Registered};

/// The step columns of a claim or sweep row as a claim; no input or outputs
/// (the sweep needs none, the claim fills them in).
pub(super) fn claim_of_step_row(row: &tokio_postgres::Row) -> Claim {
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

/// How many times one claim asks again at once, in its transaction, when the
/// statement held back or throttled rows and claimed fewer than asked: the
/// rows behind a key at its limit are never left for the next poll (see
/// `claim_limited.sql`, which also looks 100 rows ahead per queue).
const CLAIM_ROUNDS: usize = 4;

/// Sent with a claim transaction's first claim statement, in the same
/// pipeline (no round trip of its own): the claim statements take their
/// generic plan. Left to choose, Postgres plans `claim.sql` afresh on every
/// call (a custom plan looks cheaper than the generic one on every estimate),
/// and planning it costs 2 ms of server CPU against 0.1 ms of execution on
/// an idle schema; the statements are written for one plan whatever the
/// parameters and statistics (see the head of `claim.sql`). `LOCAL`: the
/// setting ends with the transaction, so nothing else the connection runs
/// (operator reads, whose filters want custom plans) is touched.
pub(super) const GENERIC_PLAN: &str = "SET LOCAL plan_cache_mode = force_generic_plan";

impl PgStore {
    /// Claims up to `limit` due steps of what `registered` holds. The rows a
    /// limit held back or throttled are counted in the flow metrics once the
    /// claim has committed.
    pub(crate) async fn claim(
        &self,
        queues: &[String],
        registered: &Registered,
        limit: i64,
        worker_id: &str,
        stall_threshold_ms: i64,
    ) -> Result<Vec<Claim>, Error> {
        let now = self.clock.now();
        let (claimed, held) = in_tx!(self.pool, |tx| self.claim_in(
            &tx,
            queues,
            registered,
            limit,
            worker_id,
            stall_threshold_ms,
            now
        ))?;
        held.record();
        Ok(claimed)
    }

    #[allow(clippy::too_many_arguments)]
    async fn claim_in(
        &self,
        tx: &Tx<'_>,
        queues: &[String],
        registered: &Registered,
        limit: i64,
        worker_id: &str,
        stall_threshold_ms: i64,
        now: Option<DateTime<Utc>>,
    ) -> Result<(Vec<Claim>, HeldBack), Error> {
        let mut claimed = Vec::new();
        let mut gated = Vec::new();
        let mut held = HeldBack::default();
        // `claim.sql` while no limit applies (the claim as it was before flow
        // control, plus three index probes); once it says one does (claiming
        // nothing), `claim_limited.sql`, until that one says none does.
        let mut limited = self.flow_limited.load(Ordering::Relaxed);
        let mut rounds = 0;
        // Whether `GENERIC_PLAN` went out yet.
        let mut generic = false;
        while rounds < CLAIM_ROUNDS {
            let sql = if limited {
                &self.sql.claim_limited
            } else {
                &self.sql.claim
            };
            let statement = self.prep.in_tx(tx, sql).await?;
            let wanted = limit.saturating_sub(i64::try_from(claimed.len()).unwrap_or(i64::MAX));
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
                &queues,
                registered.as_json(),
                &wanted,
                &worker_id,
                &stall_threshold_ms,
                &now,
            ];
            let query = statement.query(tx, &params);
            let rows = if generic {
                query.await?
            } else {
                generic = true;
                let setting = async { tx.batch_execute(GENERIC_PLAN).await.map_err(Error::from) };
                tokio::try_join!(biased; setting, query)?.1
            };
            let applies = rows
                .first()
                .is_some_and(|row| row.get::<_, bool>("limited"));
            if applies != limited {
                self.flow_limited.store(applies, Ordering::Relaxed);
                limited = applies;
                if applies {
                    // `claim.sql` claimed nothing: claim under the limits.
                    continue;
                }
            }
            rounds += 1;
            let before = claimed.len();
            let held_now = read_claim_rows(&rows, &mut claimed, &mut gated, &mut held)?;
            if i64::try_from(claimed.len() - before).unwrap_or(i64::MAX) > wanted {
                return Err(Error::RowCount {
                    statement: "claim: limit",
                    expected: u64::try_from(wanted).unwrap_or(0),
                    found: (claimed.len() - before) as u64,
                });
            }
            if held_now == 0 || i64::try_from(claimed.len()).unwrap_or(i64::MAX) >= limit {
                break;
            }
        }
        if !gated.is_empty() {
            self.gate_inputs(tx, &gated, &mut claimed).await?;
        }
        Ok((claimed, held))
    }

    /// Fills in what the gates of `gated` (claimed step ids with the signal name
    /// each waits for) read, in a statement of the claim's transaction after
    /// the one that took the locks (see `gate_inputs.sql` for why).
    async fn gate_inputs(
        &self,
        tx: &Tx<'_>,
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

    /// Milliseconds until the next scheduled step of these queues, of a step
    /// `registered` holds, is due, if one is scheduled.
    pub(crate) async fn next_due_ms(
        &self,
        queues: &[String],
        registered: &Registered,
    ) -> Result<Option<i64>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.next_due).await?;
        let row = statement
            .query_one(&client, &[&queues, registered.as_json(), &self.clock.now()])
            .await?;
        Ok(row.get(0))
    }
}

/// Reads one round of `claim.sql`'s rows into `claimed` (and the gated ones
/// into `gated`), and its held-back rows into `held`; how many rows it held
/// back or throttled. A row of NULLs (nothing claimed) carries the held-back
/// rows alone.
fn read_claim_rows(
    rows: &[tokio_postgres::Row],
    claimed: &mut Vec<Claim>,
    gated: &mut Vec<(i64, Option<String>)>,
    held: &mut HeldBack,
) -> Result<i64, Error> {
    let mut held_now = 0;
    if let Some(row) = rows.first() {
        held_now = held.add(row.try_get::<_, Value>("flow").map_err(|e| {
            Error::Corrupt(format!("claim: {}", crate::error::display_chain(&e)))
        })?)?;
    }
    for row in rows {
        if row.get::<_, Option<i64>>("id").is_none() {
            continue;
        }
        let claimed_rows: i64 = row.get("claimed_rows");
        check_count("claim: runs moved", claimed_rows, row.get("moved_rows"))?;
        check_count(
            "claim: step_started events",
            claimed_rows,
            row.get("event_rows"),
        )?;
        check_count(
            "claim: definition_changed events",
            row.get("changes"),
            row.get("changed_rows"),
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
            tick: match (row.get("schedule_name"), row.get("tick_at")) {
                (Some(schedule), Some(at)) => Some(crate::schedule::Tick { schedule, at }),
                _ => None,
            },
            ..claim_of_step_row(row)
        });
    }
    Ok(held_now)
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
