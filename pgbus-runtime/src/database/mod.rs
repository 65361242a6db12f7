//! A connection to one pgbus schema: the pool, the schema, the clock, and what
//! a worker needs to open its `LISTEN` and upkeep connections like the pool's.

mod builder;

use std::sync::Arc;

use deadpool_postgres::Pool;

use crate::client::Client;
use crate::clock::Clock;
use crate::connection::Connector;
use crate::error::Error;
use crate::pg::store::PgStore;
use crate::pg::{Schema, migrate_schema};
use crate::worker::WorkerBuilder;

pub use crate::connection::DEFAULT_APPLICATION_NAME;
pub use builder::DatabaseBuilder;
use builder::Source;

/// The database URL used when `DATABASE_URL` is not set: the local server, as the
/// operating-system user (libpq's default).
pub const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:5432/postgres";

/// How many connections the pool pgbus builds holds at most, unless
/// [`DatabaseBuilder::pool_size`] says otherwise: 16.
///
/// A worker with [`WorkerBuilder::concurrency`] `N` holds at most `N + 1` of
/// them at once: one per slot while it records an outcome (the next step it
/// runs eagerly is handed over in that same transaction), and one for the
/// claim loop. Its heartbeats and sweeps use a pool of their own
/// ([`crate::worker::UPKEEP_CONNECTIONS`]), and its `LISTEN` one more
/// connection, neither from this pool. So the default fits a worker of the
/// default concurrency (8) with clients beside it; size the pool to at least
/// the sum of `concurrency + 1` over the workers sharing one [`Database`], plus
/// what your own code and clients use at once. A pool smaller than
/// `concurrency + 1` works, slots waiting for connections, and
/// [`WorkerBuilder::build`] warns about it.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// A pgbus database: where clients and workers come from.
///
/// ```no_run
/// # async fn demo() -> Result<(), pgbus_runtime::Error> {
/// let db = pgbus_runtime::Database::connect("postgres://127.0.0.1/test").await?;
/// db.migrate().await?;
/// let client = db.client();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Database {
    pub(crate) store: PgStore,
    /// How the pool's connections were opened, for the worker's `LISTEN` and
    /// upkeep connections; `None` for a pool handed in alone.
    pub(crate) connector: Option<Arc<Connector>>,
    /// Whether a transaction-mode pooler stands between pgbus and the server
    /// ([`DatabaseBuilder::transaction_pooler`]).
    pub(crate) pooler: bool,
    /// The waits on results of every client of this database (and its
    /// clones), and the one `LISTEN` session that wakes them: shared, so a
    /// client made per request does not open a connection each.
    pub(crate) results: Arc<crate::client::ResultListener>,
    /// The deployment's overrides ([`DatabaseBuilder::overrides`]): the
    /// definitions its clients start runs with, and its workers' default.
    /// Kept here and on each client, not on the store: the store is copied
    /// into the worker's futures, which stay under clippy's size bound.
    pub(crate) overrides: Arc<crate::overrides::Overrides>,
}

impl Database {
    /// Connects to `url` (a libpq URL or key-value string), schema `pgbus`, on the
    /// database clock, with the default settings of [`Database::builder`].
    /// Checks the connection once so a wrong URL fails here.
    ///
    /// Connections carry `application_name` [`DEFAULT_APPLICATION_NAME`] unless
    /// the URL or `PGAPPNAME` sets one (`?application_name=billing-worker`). A
    /// pooled connection that sat unused for over a second answers an empty
    /// query before it is handed out, so after a server restart or a terminated
    /// backend the pool replaces dead connections instead of handing them out.
    ///
    /// # Errors
    /// As [`DatabaseBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::builder(url).connect().await
    }

    /// Connects with a schema of your choice (tests use one each) and a clock.
    ///
    /// # Errors
    /// As [`DatabaseBuilder::connect`].
    pub async fn connect_with(url: &str, schema: Schema, clock: Clock) -> Result<Self, Error> {
        Self::builder(url)
            .schema(schema)
            .clock(clock)
            .connect()
            .await
    }

    /// A builder for a connection to `url`, a libpq URL
    /// (`postgres://user:password@host:port/dbname?sslmode=verify-full`) or
    /// key-value string (`host=db.internal sslmode=verify-full`). The string's
    /// settings, libpq's environment variables and TLS are described in
    /// [`crate::connection`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), pgbus_runtime::Error> {
    /// use std::time::Duration;
    /// let db = pgbus_runtime::Database::builder("postgres://db.internal/app?sslmode=verify-full")
    ///     .pool_size(32)
    ///     .statement_timeout(Duration::from_secs(30))
    ///     .application_name("billing-worker")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: &str) -> DatabaseBuilder {
        DatabaseBuilder::new(Source::Url(url.to_owned()))
    }

    /// A builder on a pool your application already has: pgbus runs its
    /// statements on it and opens no connection of its own.
    ///
    /// A worker on such a database has no connection settings for its `LISTEN`
    /// connection, so it polls for work every
    /// [`WorkerBuilder::poll_interval`] (it says so once in the log), and its
    /// heartbeats and sweeps share the pool instead of a pool of their own; a
    /// pool whose every connection is held by step bodies for longer than the
    /// lost-worker threshold then makes the worker look lost. To keep both,
    /// give the URL too: `Database::builder(url).pool(pool)`.
    ///
    /// The schema is not checked: on an unmigrated schema the first statement
    /// fails as it does on a connected [`Database`] (the server's "relation
    /// does not exist", SQLSTATE 42P01); run [`Database::migrate`] first.
    ///
    /// ```no_run
    /// # async fn demo(pool: deadpool_postgres::Pool) -> Result<(), pgbus_runtime::Error> {
    /// let db = pgbus_runtime::Database::from_pool(pool).connect().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_pool(pool: Pool) -> DatabaseBuilder {
        DatabaseBuilder::new(Source::Pool(pool))
    }

    /// The same database on a pool of its own of `size` connections: what a
    /// worker's heartbeats and sweeps use, so bodies holding every connection of
    /// the main pool cannot starve them into looking dead. A database on a pool
    /// handed in alone has no settings to open one with, and shares its pool.
    pub(crate) fn with_own_pool(&self, size: usize) -> Result<PgStore, Error> {
        match &self.connector {
            Some(connector) => Ok(PgStore {
                pool: connector.pool(size)?,
                ..self.store.clone()
            }),
            None => Ok(self.store.clone()),
        }
    }

    /// Applies pending migrations to this database's schema.
    ///
    /// # Errors
    /// See [`crate::migrate_schema`].
    pub async fn migrate(&self) -> Result<(), Error> {
        migrate_schema(&self.store.pool, &self.store.schema).await
    }

    /// A client on this database; cheap, make one per request if you like.
    /// All clients of this database (and of its clones) share one `LISTEN`
    /// connection, outside the pool, held while any of their waits on
    /// results ([`Client::result`]) is pending; none behind a
    /// transaction-mode pooler or on a pool handed in alone, where those
    /// waits poll.
    #[must_use]
    pub fn client(&self) -> Client {
        let mut client = Client::sharing(self.store.clone(), Arc::clone(&self.results));
        client.overrides = Arc::clone(&self.overrides);
        client
    }

    /// This database with other per-deployment overrides (see
    /// [`DatabaseBuilder::overrides`]), sharing its pool: for a database
    /// built before the overrides were known, or one of a pool handed in.
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] for a value the macro would refuse.
    pub fn with_overrides(&self, overrides: crate::overrides::Overrides) -> Result<Self, Error> {
        overrides.check()?;
        let mut db = self.clone();
        db.overrides = Arc::new(overrides);
        Ok(db)
    }

    /// The per-deployment overrides in force for this database's clients
    /// and workers.
    pub fn overrides(&self) -> &crate::overrides::Overrides {
        &self.overrides
    }

    /// This database as a [`Store`](crate::store::Store): what a
    /// [`Runner`](crate::store::Runner) drives, and what the testkit's
    /// conformance suite checks against the memory store.
    #[must_use]
    pub fn store(&self) -> crate::store::PgStore {
        self.store.clone()
    }

    /// A worker builder on this database.
    #[must_use]
    pub fn worker(&self) -> WorkerBuilder {
        WorkerBuilder::new(self.clone())
    }

    /// The pool, for your own queries.
    #[must_use]
    pub fn pool(&self) -> &Pool {
        &self.store.pool
    }

    /// The schema.
    #[must_use]
    pub fn schema(&self) -> &Schema {
        &self.store.schema
    }

    /// The clock.
    #[must_use]
    pub fn clock(&self) -> &Clock {
        &self.store.clock
    }

    /// The `host:port` of each server this database connects to, in the order
    /// tried; empty for a pool handed in alone.
    #[must_use]
    pub fn servers(&self) -> Vec<String> {
        self.connector
            .as_ref()
            .map(|connector| connector.servers())
            .unwrap_or_default()
    }

    /// Whether this database was built for a transaction-mode pooler
    /// ([`DatabaseBuilder::transaction_pooler`]).
    #[must_use]
    pub const fn transaction_pooler(&self) -> bool {
        self.pooler
    }
}
