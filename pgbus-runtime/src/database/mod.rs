//! A connection to one pgbus schema: the pool, the schema, the clock, and what
//! a worker needs to open its `LISTEN` and upkeep connections like the pool's.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;

use crate::client::Client;
use crate::clock::Clock;
use crate::connection::{self, Connector, Settings};
use crate::error::Error;
use crate::pg::statement::StatementMode;
use crate::pg::store::PgStore;
use crate::pg::{Schema, migrate_schema};
use crate::worker::WorkerBuilder;

pub use crate::connection::DEFAULT_APPLICATION_NAME;

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

    /// A client on this database.
    #[must_use]
    pub fn client(&self) -> Client {
        Client {
            store: self.store.clone(),
        }
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

/// Where a [`DatabaseBuilder`] gets its connections.
enum Source {
    Url(String),
    Pool(Pool),
}

/// Builds a [`Database`]: from [`Database::builder`] (a URL) or
/// [`Database::from_pool`] (a pool of your own).
///
/// Each setting left alone keeps the URL's value (or its libpq environment
/// variable's), else the default documented on the method; a setting given
/// here wins over both.
#[must_use = "a builder does nothing until `connect` is called"]
pub struct DatabaseBuilder {
    source: Source,
    pool: Option<Pool>,
    schema: Schema,
    clock: Clock,
    pool_size: Option<usize>,
    settings: Settings,
    lookup: EnvLookup,
    limits: crate::context::Limits,
}

/// Reads an environment variable (see [`DatabaseBuilder::env_lookup`]).
type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl std::fmt::Debug for DatabaseBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseBuilder")
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl DatabaseBuilder {
    fn new(source: Source) -> Self {
        Self {
            source,
            pool: None,
            schema: Schema::default(),
            clock: Clock::Database,
            pool_size: None,
            settings: Settings::default(),
            lookup: Arc::new(connection::env::process_env),
            limits: crate::context::Limits::default(),
        }
    }

    /// The schema (default `pgbus`).
    pub fn schema(mut self, schema: Schema) -> Self {
        self.schema = schema;
        self
    }

    /// The clock (default [`Clock::Database`]).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// How many connections the pool holds at most (default
    /// [`DEFAULT_POOL_SIZE`], which explains how to size it against a worker's
    /// concurrency). Connections open on demand and stay open while the pool
    /// lives.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// How long a call waits for a free connection of the pool before it fails
    /// with [`Error::Pool`] (a wait timeout, transient); default
    /// [`connection::DEFAULT_POOL_WAIT_TIMEOUT`], 30 s. A pool handed in keeps
    /// its own timeouts.
    pub fn pool_wait_timeout(mut self, timeout: Duration) -> Self {
        self.settings.pool_wait_timeout = Some(timeout);
        self
    }

    /// How long one connection attempt to one host may take, TCP, TLS and
    /// authentication together (default: the URL's `connect_timeout`, else
    /// `PGCONNECT_TIMEOUT`, else
    /// [`connection::DEFAULT_CONNECT_TIMEOUT`], 10 s). With several hosts each
    /// gets this long.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = Some(timeout);
        self
    }

    /// `statement_timeout` for every statement on pgbus's connections, sent
    /// as a startup option (default: none, the server's or the role's
    /// setting). A statement that runs longer, or waits longer on a lock, is
    /// cancelled with SQLSTATE 57014 ("canceling statement due to statement
    /// timeout"); the engine treats that as transient and tries again. Keep
    /// it well above your slowest step outcome (a large fan-out) and, since
    /// migrations run on the pool too, above your slowest migration. Whole
    /// milliseconds; zero turns it off.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.settings.statement_timeout = Some(timeout);
        self
    }

    /// The sizes of run inputs and signal payloads this database's clients
    /// and workers accept (default [`Limits::default`](crate::Limits): 1 MiB
    /// and 256 KiB of JSON). A larger value is refused with
    /// [`Error::InvalidInput`] or [`Error::InvalidSignal`] before anything
    /// is stored; a fan-out child's input is checked in its parent's step.
    /// Every client and worker of one schema should use the same limits.
    pub fn limits(mut self, limits: crate::context::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// `lock_timeout` for every statement on pgbus's connections, sent as a
    /// startup option (default: none): a statement that waits longer than
    /// this for a lock (a table another session locked, a row an open
    /// transaction holds) is cancelled with SQLSTATE 55P03 ("canceling
    /// statement due to lock timeout") instead of waiting on. The operators'
    /// command and dashboard set it (5 s) so that a held lock answers with an
    /// error rather than a hang. Whole milliseconds; zero turns it off.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.settings.lock_timeout = Some(timeout);
        self
    }

    /// `idle_in_transaction_session_timeout`, sent as a startup option
    /// (default: none): the server ends a session that sits in an open
    /// transaction longer than this, releasing its locks. Whole milliseconds;
    /// zero turns it off.
    pub fn idle_in_transaction_session_timeout(mut self, timeout: Duration) -> Self {
        self.settings.idle_in_transaction_session_timeout = Some(timeout);
        self
    }

    /// The idle time before the first TCP keepalive probe (default: the URL's
    /// `keepalives_idle`, else [`connection::DEFAULT_KEEPALIVES_IDLE`], 5 s).
    /// Whole seconds, at least one.
    pub fn keepalives_idle(mut self, idle: Duration) -> Self {
        self.settings.keepalives_idle = Some(idle);
        self
    }

    /// The time between unanswered keepalive probes (default: the URL's
    /// `keepalives_interval`, else [`connection::DEFAULT_KEEPALIVES_INTERVAL`],
    /// 2 s). Whole seconds, at least one.
    pub fn keepalives_interval(mut self, interval: Duration) -> Self {
        self.settings.keepalives_interval = Some(interval);
        self
    }

    /// How many unanswered probes close the connection (default: the URL's
    /// `keepalives_retries`, else [`connection::DEFAULT_KEEPALIVES_RETRIES`],
    /// 3).
    pub fn keepalives_retries(mut self, retries: u32) -> Self {
        self.settings.keepalives_retries = Some(retries);
        self
    }

    /// How long sent data may go unacknowledged before the kernel closes the
    /// connection, `TCP_USER_TIMEOUT` (Linux only; default: the URL's
    /// `tcp_user_timeout`, else [`connection::DEFAULT_TCP_USER_TIMEOUT`],
    /// 10 s). Zero leaves the platform's default.
    pub fn tcp_user_timeout(mut self, timeout: Duration) -> Self {
        self.settings.tcp_user_timeout = Some(timeout);
        self
    }

    /// The `application_name` of every connection (default: the URL's, else
    /// `PGAPPNAME`, else [`DEFAULT_APPLICATION_NAME`]).
    pub fn application_name(mut self, name: &str) -> Self {
        self.settings.application_name = Some(name.to_owned());
        self
    }

    /// Whether a transaction-mode pooler (`PgBouncer`'s `pool_mode =
    /// transaction`) stands between pgbus and the server (default no).
    ///
    /// Such a pooler refuses startup `options` (`PgBouncer` 1.18 unless told to
    /// ignore them), so pgbus then sends none of its own: not `jit = off`, and
    /// not [`DatabaseBuilder::statement_timeout`] or
    /// [`DatabaseBuilder::idle_in_transaction_session_timeout`], which are then
    /// refused with [`Error::InvalidSetting`]. Set them on the role instead,
    /// where every session gets them whatever pooler serves it:
    ///
    /// ```sql
    /// ALTER ROLE app SET statement_timeout = '30s';
    /// ALTER ROLE app SET idle_in_transaction_session_timeout = '60s';
    /// ALTER ROLE app SET jit = off;
    /// ```
    ///
    /// The URL's own `options` are still sent as given.
    pub fn transaction_pooler(mut self, pooler: bool) -> Self {
        self.settings.pooler = pooler;
        self
    }

    /// Runs pgbus's statements on `pool`, a pool of your application's, while
    /// the URL's settings serve the worker's `LISTEN` and upkeep
    /// connections. (Through a transaction-mode pooler: a pool on the pooler,
    /// and the URL of the server itself, since `LISTEN` needs a session.)
    /// [`DatabaseBuilder::pool_size`] does not apply then.
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Reads libpq's environment variables through `lookup` instead of the
    /// process environment. For tests.
    #[doc(hidden)]
    pub fn env_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.lookup = Arc::new(lookup);
        self
    }

    /// Checks the settings, opens one connection to check the server answers
    /// (and closes it), and builds the pool, whose connections open on demand.
    /// For a pool handed in, takes one connection from it instead.
    ///
    /// # Errors
    /// - [`Error::InvalidSetting`]: a setting in the string, the environment or
    ///   this builder is unknown, ill-formed or does not fit with another
    ///   (`sslmode=bogus`, `PGPORT=x`, a pool size of 0, a keepalive under a
    ///   second, `statement_timeout` behind a pooler, a pool-building setting
    ///   with a pool handed in).
    /// - [`Error::UnreadableFile`]: `sslrootcert`, `sslcert` or `sslkey`
    ///   cannot be read.
    /// - [`Error::CertificateNotTrusted`], [`Error::HostNameMismatch`],
    ///   [`Error::TlsRefused`], [`Error::TlsRequired`], [`Error::Tls`]: TLS
    ///   failed, and which check.
    /// - [`Error::WrongPassword`], [`Error::PasswordMissing`]: authentication.
    /// - [`Error::Connect`], [`Error::ConnectTimeout`]: no server answered.
    /// - [`Error::Database`]: the server refused otherwise (an unknown
    ///   database or role).
    /// - [`Error::Pool`]: a pool handed in gave no connection.
    pub async fn connect(self) -> Result<Database, Error> {
        self.validate()?;
        let Self {
            source,
            pool,
            schema,
            clock,
            pool_size,
            settings,
            lookup,
            limits,
        } = self;
        let (pool, connector) = match source {
            Source::Pool(pool) => {
                // Fail here, as a connected database does, not on first use.
                drop(pool.get().await?);
                (pool, None)
            }
            Source::Url(url) => {
                let connector = Arc::new(connection::connector(
                    &url,
                    &settings,
                    &*lookup,
                    &connection::env::os_user,
                )?);
                // Fail here, with an error that says which check failed,
                // rather than on first use.
                let (client, connection) = connector.connect().await?;
                let driver = tokio::spawn(connection);
                // Dropping the client ends the session cleanly.
                drop(client);
                let _ = driver.await;
                let pool = match pool {
                    Some(pool) => {
                        drop(pool.get().await?);
                        pool
                    }
                    None => connector.pool(pool_size.unwrap_or(DEFAULT_POOL_SIZE))?,
                };
                (pool, Some(connector))
            }
        };
        let mut store = PgStore::new(
            pool,
            schema,
            clock,
            if settings.pooler {
                StatementMode::Unnamed
            } else {
                StatementMode::Cached
            },
        );
        store.connector.clone_from(&connector);
        store.limits = limits;
        Ok(Database {
            store,
            connector,
            pooler: settings.pooler,
        })
    }

    /// The settings' own checks, before anything connects.
    fn validate(&self) -> Result<(), Error> {
        let invalid = |setting: &str, problem: &str| {
            Err(Error::InvalidSetting {
                setting: setting.to_owned(),
                problem: problem.to_owned(),
            })
        };
        let settings = &self.settings;
        if self.pool_size == Some(0) {
            return invalid("pool_size", "must be at least 1");
        }
        if settings.connect_timeout == Some(Duration::ZERO) {
            return invalid("connect_timeout", "must be above zero");
        }
        if settings.pool_wait_timeout == Some(Duration::ZERO) {
            return invalid("pool_wait_timeout", "must be above zero");
        }
        for (setting, value) in [
            ("statement_timeout", settings.statement_timeout),
            ("lock_timeout", settings.lock_timeout),
            (
                "idle_in_transaction_session_timeout",
                settings.idle_in_transaction_session_timeout,
            ),
        ] {
            if value.is_some_and(|value| value < Duration::from_millis(1)) {
                return invalid(
                    setting,
                    "must be at least one millisecond (the server counts it in milliseconds, and 0 would mean no limit at all)",
                );
            }
        }
        for (setting, value) in [
            ("keepalives_idle", settings.keepalives_idle),
            ("keepalives_interval", settings.keepalives_interval),
        ] {
            if value.is_some_and(|value| value < Duration::from_secs(1)) {
                return invalid(
                    setting,
                    "must be at least one second (TCP counts it in seconds)",
                );
            }
        }
        if settings.pooler {
            for (setting, value) in [
                ("statement_timeout", settings.statement_timeout),
                ("lock_timeout", settings.lock_timeout),
                (
                    "idle_in_transaction_session_timeout",
                    settings.idle_in_transaction_session_timeout,
                ),
            ] {
                if value.is_some() {
                    return invalid(
                        setting,
                        &format!(
                            "cannot be sent as a startup option through a transaction-mode pooler; set it on the role: `ALTER ROLE ... SET {setting} = '30s'`"
                        ),
                    );
                }
            }
        }
        let handed_in = matches!(self.source, Source::Pool(_)) || self.pool.is_some();
        if handed_in && self.pool_size.is_some() {
            return invalid(
                "pool_size",
                "applies only to the pool pgbus builds; size the pool you hand in yourself",
            );
        }
        if handed_in && settings.pool_wait_timeout.is_some() {
            return invalid(
                "pool_wait_timeout",
                "applies only to the pool pgbus builds; set the wait timeout of the pool you hand in yourself",
            );
        }
        if matches!(self.source, Source::Pool(_)) {
            let opens = [
                ("connect_timeout", settings.connect_timeout.is_some()),
                ("statement_timeout", settings.statement_timeout.is_some()),
                ("lock_timeout", settings.lock_timeout.is_some()),
                (
                    "idle_in_transaction_session_timeout",
                    settings.idle_in_transaction_session_timeout.is_some(),
                ),
                ("keepalives_idle", settings.keepalives_idle.is_some()),
                (
                    "keepalives_interval",
                    settings.keepalives_interval.is_some(),
                ),
                ("keepalives_retries", settings.keepalives_retries.is_some()),
                ("tcp_user_timeout", settings.tcp_user_timeout.is_some()),
                ("application_name", settings.application_name.is_some()),
            ];
            if let Some((setting, _)) = opens.into_iter().find(|(_, set)| *set) {
                return invalid(
                    setting,
                    "applies only to connections pgbus opens; with a pool handed in alone, set it on the pool's configuration (or on the role)",
                );
            }
        }
        Ok(())
    }
}
