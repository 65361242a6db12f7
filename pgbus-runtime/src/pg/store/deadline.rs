//! Run deadlines: the sweep's pass over the runs past theirs, each acted on
//! in a transaction of its own under the run's lock.

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};

use super::{PgStore, TX_ATTEMPTS, retryable};
use crate::context::RunId;
use crate::definition::DeadlineAction;
use crate::engine::{Action, DEADLINE_ACTOR, DeadlineState, past_deadline, plan_deadline};
use crate::error::Error;

impl PgStore {
    /// Acts on up to `limit` runs past their deadline, oldest deadline
    /// first (see [`Store::expire_deadlines`](crate::store::Store::expire_deadlines)):
    /// the runs read without locks (`expiring_runs.sql`), then each in its
    /// own transaction on one connection. The runs acted on, with what their
    /// deadline did.
    pub(crate) async fn expire_deadlines(
        &self,
        limit: i64,
    ) -> Result<Vec<(RunId, DeadlineAction)>, Error> {
        let now = self.clock.now();
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.expiring_runs).await?;
        let ids: Vec<i64> = statement
            .query(&client, &[&now, &limit])
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let mut expired = Vec::new();
        for id in ids {
            let run_id = RunId(id);
            let acted = in_tx!(@on client, |tx| self.expire_in(&tx, run_id, now))?;
            if let Some(action) = acted {
                expired.push((run_id, action));
            }
        }
        Ok(expired)
    }

    /// One run's deadline, under its lock: decided again there
    /// ([`plan_deadline`]), applied as an operator action of
    /// [`DEADLINE_ACTOR`], then spent. `None`: left alone (deleted, ended, or
    /// its deadline spent or moved meanwhile).
    async fn expire_in(
        &self,
        tx: &Tx<'_>,
        run_id: RunId,
        now: Option<DateTime<Utc>>,
    ) -> Result<Option<DeadlineAction>, Error> {
        let Some(run) = self.lock_run(tx, run_id, now).await? else {
            return Ok(None);
        };
        let db_now: DateTime<Utc> = run.get("now");
        let on_deadline = match run.get::<_, Option<String>>("on_deadline") {
            None => DeadlineAction::default(),
            Some(word) => DeadlineAction::parse(&word).ok_or_else(|| {
                Error::Corrupt(format!("run {run_id}: unknown on_deadline `{word}`"))
            })?,
        };
        let deadline = DeadlineState {
            deadline_at: run.get("deadline_at"),
            on_deadline,
        };
        if !past_deadline(deadline.deadline_at, db_now) {
            return Ok(None);
        }
        let state = self.action_run(tx, run_id, &run).await?;
        let action = match on_deadline {
            DeadlineAction::Cancel => Action::Cancel,
            DeadlineAction::Pause => Action::Pause,
        };
        let plan = plan_deadline(&state, &deadline, db_now).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
        let Some(plan) = plan else {
            return Ok(None);
        };
        self.apply_action(tx, run_id, &run, &state, &plan, DEADLINE_ACTOR)
            .await?;
        let statement = self.prep.in_tx(tx, &self.sql.spend_deadline).await?;
        statement.execute(tx, &[&run_id.0]).await?;
        Ok(Some(on_deadline))
    }
}
