//! Starting runs, one or many: on the pool, on a caller's client or
//! transaction, or on a caller's sqlx connection.

use chrono::Utc;
use serde_json::Value;

use super::{PgStore, TX_ATTEMPTS, retryable};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::plan_bulk;
use crate::error::Error;
use crate::pg::start::{PgStart, StartArgs, start_with};
use crate::pg::start_many::{BulkArgs, PgBulk, start_many_with};
use crate::pg::statement::Caller;
use crate::start_options::{NewRun, StartOptions};

impl PgStore {
    /// Starts a run of `definition` with `input` as `options` say; with a
    /// key, returns the run an earlier start with that key created instead.
    /// `(run, created)`. See [`start_with`] for what a key does.
    pub(crate) async fn start_run(
        &self,
        definition: &'static WorkflowDefinition,
        input: &Value,
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, options)?;
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
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, options)?;
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
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        let args = self.start_args(definition, input, options)?;
        start_with(
            &mut crate::pg::start::SqlxStart {
                conn,
                sql: &self.sql,
            },
            &args,
        )
        .await
    }

    /// The parameters of a start of `definition` on this store, its options
    /// and input checked (the options on the pinned clock, else this
    /// machine's).
    pub(crate) fn start_args<'a>(
        &self,
        definition: &'static WorkflowDefinition,
        input: &'a Value,
        options: &'a StartOptions,
    ) -> Result<StartArgs<'a>, Error> {
        let args = StartArgs::new(
            definition,
            input,
            options,
            self.clock.now(),
            self.schema.channel(),
        )?;
        self.limits.check_input(input)?;
        Ok(args)
    }

    /// Starts `runs` of `definition`, all or none, in one transaction of the
    /// pool: two statements at most (the rows; the runs of keys taken
    /// before), whatever the count. `(run, created)` per run, in order.
    /// Retried as a whole on a deadlock or serialization failure.
    pub(crate) async fn start_many(
        &self,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        let args = self.bulk_args(definition, runs)?;
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        in_tx!(self.pool, |tx| async {
            let insert = self.prep.in_tx(&tx, &self.sql.start_many).await?;
            let find = self.prep.in_tx(&tx, &self.sql.find_runs_by_keys).await?;
            start_many_with(
                &mut PgBulk {
                    conn: &tx,
                    insert,
                    find,
                },
                &args,
            )
            .await
        })
    }

    /// As [`PgStore::start_many`], on a caller's client or transaction, with
    /// unnamed statements. All or none only inside a transaction (a failed
    /// statement aborts it); on a plain client, the first statement commits
    /// on its own.
    pub(crate) async fn start_many_on<C: tokio_postgres::GenericClient + Sync>(
        &self,
        caller: &C,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        let args = self.bulk_args(definition, runs)?;
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let insert = self.prep.unnamed(&self.pool, &self.sql.start_many).await?;
        let find = self
            .prep
            .unnamed(&self.pool, &self.sql.find_runs_by_keys)
            .await?;
        start_many_with(
            &mut PgBulk {
                conn: &Caller(caller),
                insert,
                find,
            },
            &args,
        )
        .await
    }

    /// As [`PgStore::start_many_on`], on a caller's sqlx connection.
    #[cfg(feature = "sqlx")]
    pub(crate) async fn start_many_sqlx(
        &self,
        conn: &mut sqlx::PgConnection,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        let args = self.bulk_args(definition, runs)?;
        start_many_with(
            &mut crate::pg::start_many::SqlxBulk {
                conn,
                sql: &self.sql,
            },
            &args,
        )
        .await
    }

    /// The parameters of a bulk start of `runs`, each checked (options on
    /// the pinned clock, else this machine's; inputs against the limits).
    fn bulk_args<'a>(
        &self,
        definition: &'static WorkflowDefinition,
        runs: &'a [NewRun],
    ) -> Result<BulkArgs<'a>, Error> {
        let now = self.clock.now();
        let planned = plan_bulk(definition, runs, &self.limits, now.unwrap_or_else(Utc::now))?;
        BulkArgs::new(definition, runs, planned, now, self.schema.channel())
    }
}
