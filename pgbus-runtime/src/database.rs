//! A connection to one pgbus schema: the pool, the schema, the clock, and the
//! configuration a worker uses for its `LISTEN` connection.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::client::Client;
use crate::clock::Clock;
use crate::error::Error;
use crate::pg::store::PgStore;
use crate::pg::{Schema, migrate_schema};
use crate::worker::WorkerBuilder;

/// The database URL used when `DATABASE_URL` is not set: the local server, as the
/// operating-system user (libpq's default).
pub const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:5432/postgres";

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
    pub(crate) config: tokio_postgres::Config,
}

impl Database {
    /// Connects to `url` (a libpq URL or key-value string), schema `pgbus`, on the
    /// database clock. Checks the connection once so a wrong URL fails here.
    ///
    /// # Errors
    /// Database errors, including "connection refused" when no server answers.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(url, Schema::default(), Clock::Database).await
    }

    /// Connects with a schema of your choice (tests use one each) and a clock.
    ///
    /// # Errors
    /// As [`Database::connect`].
    pub async fn connect_with(url: &str, schema: Schema, clock: Clock) -> Result<Self, Error> {
        let mut config: tokio_postgres::Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            // A server that accepts TCP but never answers must not hang a start.
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        if config.get_user().is_none() {
            // libpq connects as the operating-system user when none is given.
            let user = std::env::var("PGUSER")
                .or_else(|_| std::env::var("USER"))
                .or_else(|_| std::env::var("LOGNAME"))
                .unwrap_or_else(|_| "postgres".to_owned());
            config.user(user);
        }
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(16).build()?;
        // Fail here, with the server's own message, rather than on first use.
        drop(pool.get().await?);
        Ok(Self {
            store: PgStore::new(pool, schema, clock),
            config,
        })
    }

    /// Applies pending migrations to this database's schema.
    ///
    /// # Errors
    /// See [`crate::migrate_schema`].
    pub async fn migrate(&self) -> Result<(), Error> {
        migrate_schema(&self.store.pool, &self.store.schema).await
    }

    /// A client on this database.
    #[must_use]
    pub fn client(&self) -> Client {
        Client {
            store: self.store.clone(),
        }
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
}
