//! The Postgres store: carries out the engine's decisions. Every transition runs
//! in one transaction under the run's row lock, every update is fenced and its row
//! count checked.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;

use crate::pg::tx::Tx;
use serde_json::Value;
use tokio_postgres::error::SqlState;

use super::statement::{Preparer, StatementMode};
use super::{Schema, Statements};
use crate::clock::Clock;
use crate::context::RunId;
use crate::engine::PlannedStep;
use crate::error::Error;
use crate::pg::cancel::Guarded;

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
            let $tx = $crate::pg::tx::Tx::begin(&mut *client);
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
    /// Whether the last claim found a flow limit that applies to what it
    /// claims: the next one then starts with `claim_limited.sql` instead of
    /// `claim.sql` (see `claim.rs`). Shared by the clones of the store.
    pub(crate) flow_limited: Arc<std::sync::atomic::AtomicBool>,
    /// The groups outcomes share transactions in (`group/mod.rs`); `None` when
    /// each outcome has a transaction of its own. Shared by the clones.
    pub(crate) groups: Option<Arc<group::Groups>>,
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
            flow_limited: Arc::default(),
            groups: None,
        }
    }

    /// A connection whose statement in flight is cancelled if the caller
    /// gives up before [`Guarded::finish`]: for operator reads and actions.
    pub(crate) async fn guarded(&self) -> Result<Guarded, Error> {
        Guarded::get(&self.pool, self.connector.as_deref()).await
    }

    /// Locks run `run_id` (its fan_out parent first, see `lock_run.sql`) and
    /// returns its row; `None` when it does not exist.
    pub(super) async fn lock_run(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        now: Option<DateTime<Utc>>,
    ) -> Result<Option<tokio_postgres::Row>, Error> {
        let lock = self.prep.in_tx(tx, &self.sql.lock_run).await?;
        let rows = lock.query(tx, &[&run_id.0, &now]).await?;
        Ok(rows
            .into_iter()
            .find(|row| row.get::<_, i64>("id") == run_id.0))
    }
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

mod act;
mod change;
mod claim;
mod contract;
mod deadline;
mod fence;
mod flow;
mod group;
mod outcome;
mod park;
mod result;
mod schedules;
mod signal;
mod start;
#[cfg(test)]
mod tests;
mod upkeep;
