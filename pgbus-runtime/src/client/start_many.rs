//! Starting many runs at once, on the client's pool or inside the caller's
//! transaction, in a constant number of round trips.

use std::borrow::Borrow;

use tracing::instrument;

use super::{Client, Started};
use crate::error::Error;
use crate::start_options::{StartOptions, new_runs};
use crate::workflow::Workflow;

impl Client {
    /// Starts many runs of `W`, each with its input and [`StartOptions`]
    /// (a key or none, a start time, a queue and priority), all or none, in
    /// one transaction of two statements at most whatever their number (one
    /// writes every run, one reads back the runs of keys taken before): each
    /// start's [`Started`], in the order given. As River's `InsertMany` and
    /// Oban's `insert_all`.
    ///
    /// Keys behave as in single starts: a start whose key an earlier start of
    /// the same call has gets that run, `created: false`; one whose key a
    /// run holds already gets that run, `created: false`, and starts nothing;
    /// two calls at once with common keys start each key once (keyed runs
    /// are written in key order, so such calls wait for each other, never
    /// deadlock).
    ///
    /// ```no_run
    /// # use pgbus_runtime::prelude::*;
    /// # use pgbus_runtime::{Client, StartOptions};
    /// # struct Invoice;
    /// # #[workflow(name = "billing.invoice", input = u64)]
    /// # impl Invoice { #[step] async fn send(&self, _cx: &mut StepCx<u64>) {} }
    /// # async fn example(client: &Client) -> Result<(), pgbus_runtime::Error> {
    /// let customers = [101_u64, 102, 103];
    /// let started = client
    ///     .start_many::<Invoice>(
    ///         customers
    ///             .iter()
    ///             .map(|id| (id, StartOptions::new().key(format!("invoice-{id}")))),
    ///     )
    ///     .await?;
    /// assert_eq!(started.len(), 3);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::TooManyStarts`] for more than [`MAX_STARTS_PER_CALL`](crate::MAX_STARTS_PER_CALL)
    /// (1,000) starts or more than
    /// [`MAX_START_MANY_INPUT_BYTES`](crate::MAX_START_MANY_INPUT_BYTES)
    /// (32 MiB) of input JSON in all; [`Error::StartRefused`] with the index
    /// (from 0) of the first start whose input does not serialize or breaks
    /// the input limits, or whose options are bad, and why; nothing is
    /// started then. [`Error::NoSteps`], [`Error::StartConflict`] (a key's
    /// run deleted meanwhile: retry), and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name, pgbus.runs), err(level = "debug"))]
    pub async fn start_many<W: Workflow>(
        &self,
        starts: impl IntoIterator<Item = (impl Borrow<W::Input>, StartOptions)>,
    ) -> Result<Vec<Started>, Error> {
        let runs = new_runs::<W>(starts)?;
        tracing::Span::current().record("pgbus.runs", runs.len());
        let started = self
            .store
            .start_many(self.definition::<W>()?, &runs)
            .await?;
        Ok(started
            .into_iter()
            .map(|(run_id, created)| Started { run_id, created })
            .collect())
    }

    /// [`Client::start_many`] inside the caller's transaction `tx`, as
    /// [`Client::start_in`]: the runs exist exactly when `tx` commits, the
    /// wake-ups arrive at commit, and the two statements go out unnamed.
    /// Inside a transaction, all or none; given a plain client, the runs
    /// commit on their own.
    ///
    /// # Errors
    /// As [`Client::start_many`]; [`Error::StartConflict`] at `REPEATABLE
    /// READ` as [`Client::start_idempotent_in`]. A statement that fails
    /// aborts the caller's transaction.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name, pgbus.runs), err(level = "debug"))]
    pub async fn start_many_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        starts: impl IntoIterator<Item = (impl Borrow<W::Input>, StartOptions)>,
    ) -> Result<Vec<Started>, Error> {
        let runs = new_runs::<W>(starts)?;
        tracing::Span::current().record("pgbus.runs", runs.len());
        let started = self
            .store
            .start_many_on(tx, self.definition::<W>()?, &runs)
            .await?;
        Ok(started
            .into_iter()
            .map(|(run_id, created)| Started { run_id, created })
            .collect())
    }

    /// [`Client::start_many_in`] on a caller's sqlx connection (see
    /// [`Client::start_in_sqlx`]), with the `sqlx` feature: the same two
    /// statements, sent unnamed.
    ///
    /// # Errors
    /// As [`Client::start_many_in`]; [`Error::Sqlx`] for what the connection
    /// reports.
    #[cfg(feature = "sqlx")]
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name, pgbus.runs), err(level = "debug"))]
    pub async fn start_many_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        starts: impl IntoIterator<Item = (impl Borrow<W::Input>, StartOptions)>,
    ) -> Result<Vec<Started>, Error> {
        let runs = new_runs::<W>(starts)?;
        tracing::Span::current().record("pgbus.runs", runs.len());
        let started = self
            .store
            .start_many_sqlx(conn, self.definition::<W>()?, &runs)
            .await?;
        Ok(started
            .into_iter()
            .map(|(run_id, created)| Started { run_id, created })
            .collect())
    }
}
