//! [`DatabaseBuilder`]: the settings a [`Database`] is connected with, checked
//! before anything connects.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;

use super::{DEFAULT_POOL_SIZE, Database};
use crate::client::ResultListener;
use crate::clock::Clock;
use crate::connection::{self, Settings};
use crate::error::Error;
use crate::pg::Schema;
use crate::pg::statement::StatementMode;
use crate::pg::store::PgStore;

/// Where a [`DatabaseBuilder`] gets its connections.
pub(super) enum Source {
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
    group_commit: bool,
    overrides: crate::overrides::Overrides,
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
    pub(super) fn new(source: Source) -> Self {
        Self {
            source,
            pool: None,
            schema: Schema::default(),
            clock: Clock::Database,
            pool_size: None,
            settings: Settings::default(),
            lookup: Arc::new(connection::env::process_env),
            limits: crate::context::Limits::default(),
            group_commit: true,
            overrides: crate::overrides::Overrides::new(),
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

    /// The deployment's per-deployment overrides of workflow and step
    /// options (default none; see [`crate::overrides`]): this database's
    /// clients start runs with them (the first step's queue, priority,
    /// wait and timeout, the run's deadline), and its workers
    /// ([`Database::worker`]) run every step with them, unless a worker is
    /// given its own ([`crate::WorkerBuilder::overrides`]). Their values are
    /// checked by [`DatabaseBuilder::connect`]; their names against each
    /// workflow when a worker registers it, or a client first starts it.
    pub fn overrides(mut self, overrides: crate::overrides::Overrides) -> Self {
        self.overrides = overrides;
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

    /// Read-only sessions: `default_transaction_read_only = on`, sent as a
    /// startup option after the URL's own `options` (so they cannot turn it
    /// off; default off). A statement that writes fails with SQLSTATE 25006
    /// ("cannot execute ... in a read-only transaction"). For a reader of a
    /// replica, such as the operators' command with `--replica-url`: what
    /// it reads can never write, whichever server the URL reaches. Refused
    /// behind a transaction-mode pooler (set it on the role there).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.settings.read_only = read_only;
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
    /// `PGAPPNAME`, else [`DEFAULT_APPLICATION_NAME`](super::DEFAULT_APPLICATION_NAME)).
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

    /// Whether the outcomes of several steps that arrive together are
    /// written by one transaction (group commit; default on; `false` turns
    /// it off).
    ///
    /// On, an outcome is handed to a group of this `Database` (shared by its
    /// clones), which starts at once if fewer than two groups are running
    /// and takes every outcome waiting, at most 32; no outcome waits on a
    /// timer. Each running group holds one pooled connection. A group locks
    /// its members' runs with one statement and fences and writes them with
    /// another, `COMMIT` sent behind it; each member is fenced on its own
    /// claim: one whose fence does not hold writes nothing and ends alone (a
    /// late completion), and the others are unaffected.
    ///
    /// These end in a transaction of their own, as with this off: parks and
    /// consumed signals, cancels and plans that cancel open steps, fan-out
    /// children, retried outcomes, the sweep's endings, outcomes whose step
    /// or run holds a flow slot, and outcomes whose run is not `performing`,
    /// has ended, is held by another transaction, or already has an outcome
    /// in the group. The full rules are in `docs/decisions.md` ("Group
    /// commit").
    ///
    /// A group's transaction takes two round trips however many outcomes it
    /// writes (a transaction of its own takes three); at concurrency 16 in
    /// the benchmark a step takes under one round trip and under half a
    /// commit (`BENCHMARKS.md` section 1a). The idea is the group commit of
    /// database logs, River's batched completer and graphile-worker's
    /// batched completions.
    pub fn group_commit(mut self, on: bool) -> Self {
        self.group_commit = on;
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
    /// - [`Error::InvalidOverride`]: a value of
    ///   [`DatabaseBuilder::overrides`] the macro would refuse.
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
            group_commit,
            overrides,
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
        store.groups = group_commit.then(Arc::default);
        // Behind a transaction-mode pooler a `LISTEN` hears nothing: waits
        // on results poll.
        let listen = if settings.pooler {
            None
        } else {
            connector.clone()
        };
        let results = Arc::new(ResultListener::new(listen, store.schema.result_channel()));
        Ok(Database {
            store,
            connector,
            pooler: settings.pooler,
            results,
            overrides: Arc::new(overrides),
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
        self.overrides.check()?;
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
            refused_behind_a_pooler(settings)?;
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

/// The first session setting given that a transaction-mode pooler cannot
/// carry (it refuses startup options), as [`Error::InvalidSetting`] saying
/// how to set it on the role instead.
fn refused_behind_a_pooler(settings: &Settings) -> Result<(), Error> {
    // Each setting, whether given, and how the role sets it.
    for (setting, given, on_the_role) in [
        (
            "statement_timeout",
            settings.statement_timeout.is_some(),
            "statement_timeout = '30s'",
        ),
        (
            "lock_timeout",
            settings.lock_timeout.is_some(),
            "lock_timeout = '30s'",
        ),
        (
            "idle_in_transaction_session_timeout",
            settings.idle_in_transaction_session_timeout.is_some(),
            "idle_in_transaction_session_timeout = '30s'",
        ),
        (
            "read_only",
            settings.read_only,
            "default_transaction_read_only = on",
        ),
    ] {
        if given {
            return Err(Error::InvalidSetting {
                setting: setting.to_owned(),
                problem: format!(
                    "cannot be sent as a startup option through a transaction-mode pooler; set it on the role: `ALTER ROLE ... SET {on_the_role}`"
                ),
            });
        }
    }
    Ok(())
}
