//! Starting a run: on the pool, on a caller's client or transaction, or on a caller's sqlx connection.

use serde_json::Value;

use super::PgStore;
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::error::Error;
use crate::pg::start::{PgStart, StartArgs, start_with};
use crate::pg::statement::Caller;

impl PgStore {
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
            &mut crate::pg::start::SqlxStart {
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
}
