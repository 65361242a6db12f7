//! Connecting as libpq does: connection strings (URL or key-value), TLS
//! (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`), libpq's environment
//! variables, and the connection settings of [`crate::DatabaseBuilder`].
//!
//! A connection string is read in three steps:
//!
//! 1. pgbus takes out the settings tokio-postgres 0.7 does not know or knows
//!    differently: `sslmode` (all six of libpq's modes), `sslrootcert` (a PEM
//!    file, or `system` for the platform's roots), `sslcert`, `sslkey` (the
//!    client certificate and its key, PEM) and `sslsni` (`0` or `1`).
//! 2. tokio-postgres parses the rest: `host` (several, comma-separated, with
//!    `port`s to match), `hostaddr`, `port`, `user`, `password`, `dbname`,
//!    `options`, `application_name`, `connect_timeout`, `keepalives*`,
//!    `tcp_user_timeout`, `target_session_attrs`, `channel_binding`,
//!    `load_balance_hosts`, `sslnegotiation`. Any other setting is an
//!    [`Error::InvalidSetting`] that names it.
//! 3. libpq's environment variables fill what the string left out: `PGHOST`
//!    (or `PGHOSTADDR`), `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`,
//!    `PGAPPNAME`, `PGOPTIONS`, `PGCONNECT_TIMEOUT`, `PGTARGETSESSIONATTRS`,
//!    `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`. With no user
//!    anywhere, the operating system's user name is taken (as libpq does; not
//!    `$USER`, and never `postgres`); with no host, `localhost` (libpq would use
//!    its Unix socket). An empty variable counts as unset.
//!
//! Hosts are tried in the order given, each attempt bounded by the connect
//! timeout (as libpq's `connect_timeout`, which is per host); an error is about
//! the last host tried and names it with its port.
//!
//! What pgbus does not read: a password file (`passfile`, `~/.pgpass`), a
//! service file (`service`), encrypted client keys (`sslpassword`), revocation
//! lists (`sslcrl`), and libpq's default client certificate files
//! (`~/.postgresql/postgresql.crt`); it does read `~/.postgresql/root.crt` as
//! the default root certificate, as libpq does.
//!
//! TLS is rustls with the `ring` crypto provider, through
//! `tokio-postgres-rustls` (which supports SCRAM channel binding,
//! `tls-server-end-point`).

mod classify;
mod connect;
pub(crate) mod env;
mod params;
mod tls;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub(crate) use connect::Connector;
pub use tls::SslMode;

use crate::error::Error;

/// How long one connection attempt to one host may take, TCP, TLS and
/// authentication together, unless the URL (`connect_timeout`),
/// `PGCONNECT_TIMEOUT` or [`crate::DatabaseBuilder::connect_timeout`] says
/// otherwise: 10 seconds.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may sit idle before the first TCP keepalive probe:
/// 5 seconds (the platform's default is usually two hours).
pub const DEFAULT_KEEPALIVES_IDLE: Duration = Duration::from_secs(5);

/// The time between unanswered keepalive probes: 2 seconds.
pub const DEFAULT_KEEPALIVES_INTERVAL: Duration = Duration::from_secs(2);

/// How many unanswered probes close the connection: 3. With the idle time and
/// interval above, an idle half-open connection is noticed within about
/// 5 + 3 × 2 = 11 seconds.
pub const DEFAULT_KEEPALIVES_RETRIES: u32 = 3;

/// How long sent data may stay unacknowledged before the kernel closes the
/// connection (`TCP_USER_TIMEOUT`, Linux only; ignored elsewhere): 10 seconds,
/// so a connection that goes half-open while a statement is being sent is
/// noticed in seconds rather than after the kernel's retransmission limit (about
/// 15 minutes).
pub const DEFAULT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for a free connection of a pool pgbus built before it
/// fails with a pool timeout (`Error::Pool`, transient), when the builder sets
/// no other ([`crate::DatabaseBuilder::pool_wait_timeout`]): long enough for
/// a busy worker's slots to hand connections on, short enough that a client
/// call behind an exhausted pool answers rather than hangs.
pub const DEFAULT_POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The `application_name` pgbus connections carry when neither the URL,
/// `PGAPPNAME` nor the builder names one, so they can be told apart in
/// `pg_stat_activity`.
pub const DEFAULT_APPLICATION_NAME: &str = "pgbus";

/// The connection settings a [`crate::DatabaseBuilder`] adds to the string's;
/// `None` leaves the string's (or the default).
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) keepalives_idle: Option<Duration>,
    pub(crate) keepalives_interval: Option<Duration>,
    pub(crate) keepalives_retries: Option<u32>,
    pub(crate) tcp_user_timeout: Option<Duration>,
    pub(crate) application_name: Option<String>,
    pub(crate) statement_timeout: Option<Duration>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) idle_in_transaction_session_timeout: Option<Duration>,
    pub(crate) pool_wait_timeout: Option<Duration>,
    /// Behind a transaction-mode pooler: no startup `options` of pgbus's own.
    pub(crate) pooler: bool,
    /// `default_transaction_read_only = on`, after the string's options.
    pub(crate) read_only: bool,
}

/// The `host:port` of each server `url` names, after libpq's environment
/// variables: what an error message or a log line can show to say where pgbus
/// connects.
///
/// # Errors
/// [`Error::InvalidSetting`] when the string does not parse.
pub fn servers(url: &str) -> Result<Vec<String>, Error> {
    Ok(connector(url, &Settings::default(), &env::process_env, &env::os_user)?.servers())
}

/// Builds the connector for `text` with the builder's `settings`, reading the
/// environment through `lookup` and the user name through `os_user`.
///
/// # Errors
/// [`Error::InvalidSetting`] and [`Error::UnreadableFile`] for settings that
/// are unknown, ill-formed or do not fit together, or files that cannot be
/// read.
pub(crate) fn connector(
    text: &str,
    settings: &Settings,
    lookup: env::Lookup<'_>,
    os_user: &dyn Fn() -> Option<String>,
) -> Result<Connector, Error> {
    let resolved = env::resolve(text, lookup, os_user)?;
    let tls = resolved.tls.resolve(resolved.home.as_deref())?;
    let mut config = resolved.config;
    let keys = &resolved.keys;

    let connect_timeout = settings
        .connect_timeout
        .or_else(|| config.get_connect_timeout().copied())
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    config.connect_timeout(connect_timeout);
    if let Some(idle) = settings.keepalives_idle {
        config.keepalives_idle(idle);
    } else if !keys.contains("keepalives_idle") {
        config.keepalives_idle(DEFAULT_KEEPALIVES_IDLE);
    }
    if let Some(interval) = settings.keepalives_interval.or_else(|| {
        config
            .get_keepalives_interval()
            .is_none()
            .then_some(DEFAULT_KEEPALIVES_INTERVAL)
    }) {
        config.keepalives_interval(interval);
    }
    if let Some(retries) = settings.keepalives_retries.or_else(|| {
        config
            .get_keepalives_retries()
            .is_none()
            .then_some(DEFAULT_KEEPALIVES_RETRIES)
    }) {
        config.keepalives_retries(retries);
    }
    if let Some(timeout) = settings.tcp_user_timeout.or_else(|| {
        config
            .get_tcp_user_timeout()
            .is_none()
            .then_some(DEFAULT_TCP_USER_TIMEOUT)
    }) {
        config.tcp_user_timeout(timeout);
    }
    if let Some(name) = &settings.application_name {
        config.application_name(name);
    } else if config.get_application_name().is_none() {
        config.application_name(DEFAULT_APPLICATION_NAME);
    }
    let server_keepalives = server_keepalives(&config);
    if let Some(options) = session_options(settings, &server_keepalives, config.get_options()) {
        config.options(&options);
    }
    Ok(Connector {
        config,
        tls,
        connect_timeout,
        pool_wait: settings
            .pool_wait_timeout
            .unwrap_or(DEFAULT_POOL_WAIT_TIMEOUT),
    })
}

/// The server's side of the keepalives: the same idle time, interval, count
/// and `tcp_user_timeout` as the client's, as session settings. Without them
/// the backend of a connection that went half-open while inside a transaction
/// sits `idle in transaction`, holding its row locks, for as long as the
/// server's kernel keeps the dead socket (hours with Linux's defaults), and
/// the worker's retry of that outcome waits on those locks; the half-open
/// chaos test shows it. Empty when the client's keepalives are off.
fn server_keepalives(config: &tokio_postgres::Config) -> Vec<String> {
    if !config.get_keepalives() {
        return Vec::new();
    }
    let mut options = vec![
        format!(
            "-c tcp_keepalives_idle={}",
            config.get_keepalives_idle().as_secs().max(1)
        ),
        format!(
            "-c tcp_keepalives_interval={}",
            config
                .get_keepalives_interval()
                .map_or(DEFAULT_KEEPALIVES_INTERVAL, |d| d)
                .as_secs()
                .max(1)
        ),
        format!(
            "-c tcp_keepalives_count={}",
            config
                .get_keepalives_retries()
                .unwrap_or(DEFAULT_KEEPALIVES_RETRIES)
        ),
    ];
    if let Some(timeout) = config.get_tcp_user_timeout() {
        options.push(format!("-c tcp_user_timeout={}", timeout.as_millis()));
    }
    options
}

/// The startup `options` of every connection: pgbus's session settings, then
/// the string's own `options` (which therefore win, so `options=-c jit=on`
/// turns JIT back on). Behind a transaction-mode pooler only the string's.
///
/// `jit = off`: the engine's statements are short and touch a handful of rows,
/// and a plan whose cost the planner overestimates (a recursive scan of the due
/// index, on empty-table statistics) would otherwise spend 100-200 ms compiling
/// before a 1 ms execution.
fn session_options(
    settings: &Settings,
    server_keepalives: &[String],
    given: Option<&str>,
) -> Option<String> {
    let given = given.filter(|options| !options.is_empty());
    if settings.pooler {
        return given.map(str::to_owned);
    }
    let mut options = vec!["-c jit=off".to_owned()];
    options.extend(server_keepalives.iter().cloned());
    if let Some(timeout) = settings.statement_timeout {
        options.push(format!("-c statement_timeout={}", timeout.as_millis()));
    }
    if let Some(timeout) = settings.lock_timeout {
        options.push(format!("-c lock_timeout={}", timeout.as_millis()));
    }
    if let Some(timeout) = settings.idle_in_transaction_session_timeout {
        options.push(format!(
            "-c idle_in_transaction_session_timeout={}",
            timeout.as_millis()
        ));
    }
    options.extend(given.map(str::to_owned));
    // After the string's own: a session asked to be read-only stays so.
    if settings.read_only {
        options.push("-c default_transaction_read_only=on".to_owned());
    }
    Some(options.join(" "))
}
