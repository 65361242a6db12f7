//! Starting runs: with or without an idempotency key or other options, on
//! the client's pool or inside the caller's transaction. Every form is
//! [`Client::start_with`] (or its `_in`/`_in_sqlx` form) with the options it
//! implies.

use tracing::instrument;

use super::{Client, Started};
use crate::error::Error;
use crate::start_options::StartOptions;
use crate::workflow::Workflow;

impl Client {
    /// Starts a run of `W` with `input` as `options` say: an idempotency key,
    /// a start time or delay, the run's queue and priority, its concurrency
    /// key (see [`StartOptions`] for what each does; without a concurrency
    /// key, the one `W`'s `key` method derives from `input`, if it has one).
    /// The first step is due at the start time (now, counted on the database
    /// clock, when none is given) plus that step's own `wait`.
    ///
    /// ```no_run
    /// # use pgbus_runtime::prelude::*;
    /// # use pgbus_runtime::{Client, StartOptions};
    /// # struct Nightly;
    /// # #[workflow(name = "reports.nightly", input = u32)]
    /// # impl Nightly { #[step] async fn build(&self, _cx: &mut StepCx<u32>) {} }
    /// # async fn example(client: &Client) -> Result<(), pgbus_runtime::Error> {
    /// let started = client
    ///     .start_with::<Nightly>(
    ///         &7,
    ///         &StartOptions::new()
    ///             .key("report-7")
    ///             .delay(std::time::Duration::from_hours(1))
    ///             .queue("reports")
    ///             .priority(-5),
    ///     )
    ///     .await?;
    /// # let _ = started; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Json`] when the input does not serialize,
    /// [`Error::InvalidInput`] when it breaks the input limits, the errors of
    /// [`StartOptions::check`] (a bad key, [`Error::InvalidStartOption`]
    /// naming `at`, `delay`, `queue` or `concurrency_key`), [`Error::NoSteps`],
    /// [`Error::InvalidOverride`] when the database's per-deployment overrides
    /// ([`crate::overrides`]) do not fit `W`, and database errors. Nothing is
    /// started on an error.
    ///
    /// The run is started with `W`'s definition as the database's overrides
    /// derive it: its first step's queue, priority, wait and timeout, and
    /// the run's deadline, are the deployment's.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_with<W: Workflow>(
        &self,
        input: &W::Input,
        options: &StartOptions,
    ) -> Result<Started, Error> {
        let keyed = keyed::<W>(input, options);
        let options = keyed.as_deref().unwrap_or(options);
        let input = serde_json::to_value(input)?;
        let (run_id, created) = self
            .store
            .start_run(self.definition::<W>()?, &input, options)
            .await?;
        Ok(Started { run_id, created })
    }

    /// [`Client::start_with`] inside the caller's transaction `tx`, as
    /// [`Client::start_in`] (the run exists exactly when `tx` commits; the
    /// wake-up arrives at commit; unnamed statements) and, with a key, as
    /// [`Client::start_idempotent_in`]. A start time counts from
    /// `clock_timestamp()` at the statement, not from the start of `tx`.
    ///
    /// # Errors
    /// As [`Client::start_with`], and [`Error::StartConflict`] as
    /// [`Client::start_idempotent_in`]. A statement that fails aborts the
    /// caller's transaction, as any failed statement does.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_with_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        input: &W::Input,
        options: &StartOptions,
    ) -> Result<Started, Error> {
        let keyed = keyed::<W>(input, options);
        let options = keyed.as_deref().unwrap_or(options);
        let input = serde_json::to_value(input)?;
        let (run_id, created) = self
            .store
            .start_run_on(tx, self.definition::<W>()?, &input, options)
            .await?;
        Ok(Started { run_id, created })
    }

    /// [`Client::start_with_in`] on a caller's sqlx connection (see
    /// [`Client::start_in_sqlx`]), with the `sqlx` feature.
    ///
    /// # Errors
    /// As [`Client::start_with_in`]; [`Error::Sqlx`] for what the connection
    /// reports.
    #[cfg(feature = "sqlx")]
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_with_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        input: &W::Input,
        options: &StartOptions,
    ) -> Result<Started, Error> {
        let keyed = keyed::<W>(input, options);
        let options = keyed.as_deref().unwrap_or(options);
        let input = serde_json::to_value(input)?;
        let (run_id, created) = self
            .store
            .start_run_sqlx(conn, self.definition::<W>()?, &input, options)
            .await?;
        Ok(Started { run_id, created })
    }

    /// Starts a run of `W` with `input`. Its first step is due after that step's
    /// `wait`, counted on the database clock.
    ///
    /// # Errors
    /// [`Error::Json`] when the input does not serialize, [`Error::NoSteps`], and
    /// database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start<W: Workflow>(&self, input: &W::Input) -> Result<Started, Error> {
        self.start_with::<W>(input, &StartOptions::new()).await
    }

    /// Starts a run of `W` unless one was already started with `key` (keys are per
    /// workflow): then returns that run and starts nothing. Two concurrent calls
    /// with one key start one run. (Idempotency keys as in Stripe's API.)
    ///
    /// # Errors
    /// [`Error::BlankIdempotencyKey`] for an empty or blank key,
    /// [`Error::InvalidIdempotencyKey`] for one over 255 characters or with control
    /// characters, and the errors of [`Client::start`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent<W: Workflow>(
        &self,
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        self.start_with::<W>(input, &StartOptions::new().key(key))
            .await
    }

    /// Starts a run of `W` with `input` inside the caller's transaction `tx`
    /// (any tokio-postgres client or transaction on this database; for one of
    /// [`Database::pool`](crate::Database::pool), pass `&*tx`), so the run
    /// commits or rolls back with the caller's own rows: it exists exactly
    /// when `tx` commits, and nothing of it (run, step, event) when `tx` rolls
    /// back. The workers' wake-up is a `pg_notify` in `tx`, which Postgres
    /// delivers only at commit, so no worker looks for the run before it is
    /// visible. As River's `InsertTx` and Oban's `insert` inside
    /// `Repo.transaction`.
    ///
    /// The statement is sent unnamed (one round trip, nothing left prepared
    /// on the caller's connection, safe behind a transaction-mode pooler). The
    /// first step's due time counts from `clock_timestamp()`, not from the
    /// start of a long transaction. Given a plain client
    /// rather than a transaction, the start commits on its own, as
    /// [`Client::start`] does.
    ///
    /// # Errors
    /// As [`Client::start`]. A statement that fails aborts the caller's
    /// transaction, as any failed statement does.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        input: &W::Input,
    ) -> Result<Started, Error> {
        self.start_with_in::<W>(tx, input, &StartOptions::new())
            .await
    }

    /// [`Client::start_idempotent`] inside the caller's transaction `tx`, as
    /// [`Client::start_in`]. Behaves as outside a transaction: a run that a
    /// committed start holds `key` for is returned with `created: false`; a
    /// transaction that holds the key and is still open makes this start wait
    /// for it: if it rolls back, this start creates the run, if it commits,
    /// this one returns its run. If `tx` rolls back, a run it created is gone
    /// and the key free again.
    ///
    /// At `REPEATABLE READ` or `SERIALIZABLE`, a run with `key` committed
    /// after `tx`'s snapshot was taken cannot be returned (the transaction
    /// cannot see it): the start fails with [`Error::StartConflict`] and `tx`
    /// must be retried, as for any serialization failure.
    ///
    /// # Errors
    /// [`Error::StartConflict`] as above, and the errors of
    /// [`Client::start_idempotent`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        self.start_with_in::<W>(tx, input, &StartOptions::new().key(key))
            .await
    }

    /// [`Client::start_in`] on a caller's sqlx connection, with the `sqlx`
    /// feature: pass `&mut *tx` for a `sqlx::Transaction<'_, Postgres>` (it
    /// dereferences to a `PgConnection`). The run exists exactly when the
    /// caller's transaction commits; the wake-up arrives at commit. Sent
    /// unnamed (`persistent(false)`): nothing is left in the connection's
    /// statement cache or on the server. The same SQL and the same decisions
    /// as every other start.
    ///
    /// # Errors
    /// As [`Client::start`]; [`Error::Sqlx`] for what the connection reports.
    #[cfg(feature = "sqlx")]
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        input: &W::Input,
    ) -> Result<Started, Error> {
        self.start_with_in_sqlx::<W>(conn, input, &StartOptions::new())
            .await
    }

    /// [`Client::start_idempotent_in`] on a caller's sqlx connection (see
    /// [`Client::start_in_sqlx`]): the same key semantics, the same
    /// [`Error::StartConflict`] at `REPEATABLE READ`.
    ///
    /// # Errors
    /// As [`Client::start_idempotent_in`]; [`Error::Sqlx`] for what the
    /// connection reports.
    #[cfg(feature = "sqlx")]
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        self.start_with_in_sqlx::<W>(conn, input, &StartOptions::new().key(key))
            .await
    }
}

/// `options` with the concurrency key of a run of `W` with `input` (see
/// [`StartOptions::with_key_of`]) when `W`'s key method adds one, else
/// `None` (the options as given). Boxed: a start's future holds it.
fn keyed<W: Workflow>(input: &W::Input, options: &StartOptions) -> Option<Box<StartOptions>> {
    if options.run_concurrency_key().is_none()
        && let Some(key) = W::concurrency_key(input)
    {
        Some(Box::new(options.clone().concurrency_key(key)))
    } else {
        None
    }
}
