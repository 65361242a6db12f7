//! A connection to one pgbus schema: the pool, the schema, the clock, and the
//! configuration a worker uses for its `LISTEN` connection.

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::client::Client;
use crate::clock::Clock;
use crate::error::Error;
use crate::pg::statement::StatementMode;
use crate::pg::store::PgStore;
use crate::pg::{Schema, migrate_schema};
use crate::worker::WorkerBuilder;

/// The database URL used when `DATABASE_URL` is not set: the local server, as the
/// operating-system user (libpq's default).
pub const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:5432/postgres";

/// The `application_name` pgbus connections carry when the URL names none, so
/// they can be told apart in `pg_stat_activity`.
pub const DEFAULT_APPLICATION_NAME: &str = "pgbus";

/// A pooled connection unused for longer than this is checked with an empty
/// query before it is handed out again.
const CHECK_IDLE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How long that check may take; a connection that does not answer in time is
/// dropped and replaced.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// Connections carry `application_name` [`DEFAULT_APPLICATION_NAME`] unless
    /// the URL sets one (`?application_name=billing-worker`). A pooled connection
    /// that sat unused for over a second answers an empty query before it is
    /// handed out, so after a server restart or a terminated backend the pool
    /// replaces dead connections instead of handing them out.
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
        Self::open(url, schema, clock, StatementMode::Cached).await
    }

    /// Connects as [`Database::connect_with`] through a transaction-mode pooler
    /// such as PgBouncer: every statement unnamed (nothing prepared outlives a
    /// transaction), no startup `options` (PgBouncer refuses them, so set
    /// `jit = off` and the like on the role instead), and workers poll unless
    /// given a direct connection for `LISTEN`
    /// ([`WorkerBuilder::listen_url`]).
    ///
    /// Temporary: replaced by a builder flag.
    ///
    /// # Errors
    /// As [`Database::connect`].
    #[doc(hidden)]
    pub async fn connect_behind_pooler(
        url: &str,
        schema: Schema,
        clock: Clock,
    ) -> Result<Self, Error> {
        Self::open(url, schema, clock, StatementMode::Unnamed).await
    }

    async fn open(
        url: &str,
        schema: Schema,
        clock: Clock,
        mode: StatementMode,
    ) -> Result<Self, Error> {
        let config = direct_config(url)?;
        let pool = build_pool(&config, 16, mode == StatementMode::Unnamed)?;
        // Fail here, with the server's own message, rather than on first use.
        drop(pool.get().await?);
        Ok(Self {
            store: PgStore::new(pool, schema, clock, mode),
            config,
        })
    }

    /// Whether this database is reached through a transaction-mode pooler.
    pub(crate) fn behind_pooler(&self) -> bool {
        self.store.prep.mode() == StatementMode::Unnamed
    }

    /// The same database on a pool of its own of `size` connections: what a
    /// worker's heartbeats and sweeps use, so bodies holding every connection of
    /// the main pool cannot starve them into looking dead.
    pub(crate) fn with_own_pool(&self, size: usize) -> Result<PgStore, Error> {
        Ok(PgStore {
            pool: build_pool(&self.config, size, self.behind_pooler())?,
            ..self.store.clone()
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

/// The configuration of `url`, with the defaults pgbus fills in: a connect
/// timeout, the user, and `application_name`.
pub(crate) fn direct_config(url: &str) -> Result<tokio_postgres::Config, Error> {
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
    if config.get_application_name().is_none() {
        // So operators (and tests) can find these connections in
        // `pg_stat_activity`; a URL's own `application_name` wins.
        config.application_name(DEFAULT_APPLICATION_NAME);
    }
    Ok(config)
}

/// A pool of `size` connections on `config`.
///
/// `Fast` recycling drops a pooled connection whose client saw its socket
/// close. The hook adds what that misses: a connection unused for over
/// `CHECK_IDLE_AFTER` may have died since (a restart or a terminated backend
/// whose goodbye is still unread, a half-open socket), so it must answer an
/// empty query within `CHECK_TIMEOUT` or be replaced. A connection in steady use
/// proves itself, so the hot path pays no extra round trip: `Verified`
/// recycling, which checks every checkout, cost a claim-bound worker of the
/// chaos test about 13% of its steps per second. `Clean` would also reset
/// session state, but pgbus keeps none.
///
/// Each connection runs with `jit = off`: the engine's statements are short
/// and touch a handful of rows, and a plan whose cost the planner overestimates
/// (a recursive scan of the due index, on empty-table statistics) would
/// otherwise spend 100-200 ms compiling before a 1 ms execution. Options the
/// URL sets are kept and come after, so `options=-c jit=on` turns it back on.
///
/// Behind a transaction-mode `pooler` no startup `options` are sent at all:
/// `PgBouncer` refuses them (set them on the role, `ALTER ROLE ... SET jit =
/// off`); the URL's own `options`, if it sets any, still go.
fn build_pool(config: &tokio_postgres::Config, size: usize, pooler: bool) -> Result<Pool, Error> {
    let mut config = config.clone();
    // Behind a pooler the URL's own `options`, if any, go as they are.
    if !pooler {
        let options = match config.get_options() {
            Some(options) if !options.is_empty() => format!("-c jit=off {options}"),
            _ => "-c jit=off".to_owned(),
        };
        config.options(&options);
    }
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager)
        .max_size(size)
        .pre_recycle(Hook::async_fn(|client, metrics| {
            Box::pin(async move {
                if metrics.last_used() < CHECK_IDLE_AFTER || client.is_closed() {
                    // A closed one is dropped by `Fast` recycling right after.
                    return Ok(());
                }
                match tokio::time::timeout(CHECK_TIMEOUT, client.simple_query("")).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(error)) => Err(HookError::Backend(error)),
                    Err(_) => Err(HookError::message("the connection did not answer")),
                }
            })
        }))
        .build()?)
}
