//! Delivering a signal to a run.

use std::collections::BTreeSet;

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{PgStore, TX_ATTEMPTS, check_count, parse_stored, retryable};
use crate::context::{RunId, SignalId};
use crate::engine::{RunStatus, SignalCheck, check_signal_target};
use crate::error::Error;

impl PgStore {
    /// Delivers a signal (its name and payload already checked) to a run
    /// that has not ended, waking the steps waiting for it; with
    /// [`SignalCheck::Waited`], only a name some definition of the run's
    /// workflow waits for.
    pub(crate) async fn signal(
        &self,
        run_id: RunId,
        name: &str,
        payload: &Value,
        check: SignalCheck,
    ) -> Result<SignalId, Error> {
        let now = self.clock.now();
        in_tx!(self.pool, |tx| self
            .signal_in(&tx, run_id, name, payload, check, now))
    }

    async fn signal_in(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        name: &str,
        payload: &Value,
        check: SignalCheck,
        now: Option<DateTime<Utc>>,
    ) -> Result<SignalId, Error> {
        // The run's lock first, in a statement of its own, so the send reads
        // what an attempt parking meanwhile committed (lock_signalled_run.sql);
        // with it, for a checked signal, the names its workflow waits for.
        let lock = self.prep.in_tx(tx, &self.sql.lock_signalled_run).await?;
        let checked = check == SignalCheck::Waited;
        let Some(locked) = lock.query_opt(tx, &[&run_id.0, &checked]).await? else {
            return Err(Error::RunNotFound { run_id });
        };
        let status: RunStatus = parse_stored(locked.get("status"))?;
        if status.is_terminal() {
            return Err(Error::RunEnded { run_id, status });
        }
        if checked {
            let waited: Option<Vec<String>> = locked.get("waited");
            let waited: Option<BTreeSet<String>> = waited.map(|names| names.into_iter().collect());
            check_signal_target(run_id, locked.get("workflow"), name, waited.as_ref())?;
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
}
