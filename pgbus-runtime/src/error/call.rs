//! [`Error`]: what a client, worker or migration call fails with.

use std::fmt;
use std::time::Duration;

#[cfg(feature = "sqlx")]
use super::driver::describe_sqlx_error;
use super::driver::{describe_driver_error, describe_pool_error, driver_cause};
use super::step_error::safe_display;

/// The error of a client, worker or migration call.
///
/// `Display` is one line that says what happened, with the server's own words
/// where the server spoke: `database error: ERROR: canceling statement due to
/// statement timeout (SQLSTATE 57014)`. `Debug` (what `main` prints for an
/// `Err` it returns, and `{:?}`) is that line followed by the error's causes,
/// one per line, as `anyhow` prints a chain. The driver variants carry the
/// driver's error for code that wants to inspect it ([`tokio_postgres::Error::code`],
/// [`tokio_postgres::Error::as_db_error`]) but report no `source()`: their
/// `Display` already says everything the driver knows, so a chain printer
/// would only say it twice.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Postgres refused or failed a statement, or the connection failed.
    #[error("database error: {}", describe_driver_error(.0))]
    Database(tokio_postgres::Error),
    /// The caller's sqlx connection refused or failed a statement (see
    /// [`Client::start_in_sqlx`](crate::Client::start_in_sqlx)); sqlx's own
    /// words end the `Display`, so it is not also a `source()`.
    #[cfg(feature = "sqlx")]
    #[error("{}", describe_sqlx_error(.0))]
    Sqlx(sqlx::Error),
    /// No connection could be had from the pool.
    #[error("{}", describe_pool_error(.0))]
    Pool(deadpool_postgres::PoolError),
    /// The pool could not be built.
    #[error("could not build the connection pool")]
    BuildPool(#[from] deadpool_postgres::BuildError),
    /// The schema name is not a plain identifier.
    #[error(
        "schema name `{0}` is not a valid identifier: use 1 to 57 lowercase letters, digits and `_`, not starting with a digit nor with `pg_` (57 leaves room for the `pgbus_` of the notification channel within Postgres's 63)"
    )]
    InvalidSchema(String),
    /// A migration that was already applied has changed since.
    #[error(
        "migration {version} ({name}) was changed after it was applied (checksum {applied} in the database, {current} now); migrations are append-only, add a new one instead"
    )]
    MigrationChanged {
        /// Its number.
        version: i32,
        /// Its file name.
        name: String,
        /// The checksum recorded when it was applied.
        applied: String,
        /// The checksum of the file now.
        current: String,
    },
    /// The database has migrations this build does not know: a newer version ran.
    #[error(
        "the database has migration {version}, which this build does not know; deploy the newer build"
    )]
    UnknownMigration {
        /// The unknown migration's number.
        version: i32,
    },
    /// No run has this id.
    #[error("run {run_id} does not exist")]
    RunNotFound {
        /// The id asked for.
        run_id: crate::RunId,
    },
    /// An operator action that is not legal from the run's state (pause of a
    /// paused run, resume of a running one, anything on an ended run, ...).
    #[error("cannot {action} run {run_id}: {why}")]
    IllegalMove {
        /// The run.
        run_id: crate::RunId,
        /// What was asked.
        action: crate::engine::Action,
        /// Why it is refused.
        why: crate::engine::IllegalMove,
    },
    /// A signal for a run that has finished or been cancelled; nothing was
    /// stored.
    #[error("run {run_id} has ended ({status}); the signal was not stored")]
    RunEnded {
        /// The run.
        run_id: crate::RunId,
        /// `finished` or `cancelled`.
        status: crate::RunStatus,
    },
    /// A run input (a start's, or a fan-out child's) that cannot be stored
    /// or read back: see [`crate::context::check_input`].
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },
    /// A signal whose name or payload cannot be stored.
    #[error("invalid signal: {reason}")]
    InvalidSignal {
        /// What is wrong.
        reason: String,
    },
    /// An operator action's actor that is empty, over 255 characters, holds
    /// control or invisible formatting characters, or starts or ends with
    /// whitespace.
    #[error(
        "an actor must be 1 to 255 characters of visible text, without whitespace at either end"
    )]
    InvalidActor,
    /// An operator action's reason that is empty, whitespace alone or over
    /// 10,000 characters (see [`crate::client::check_reason`]).
    #[error("a reason must say why: 1 to 10,000 characters, not whitespace alone")]
    InvalidReason,
    /// An idempotency key that is empty or only whitespace.
    #[error("an idempotency key cannot be empty or blank")]
    BlankIdempotencyKey,
    /// An idempotency key longer than [`MAX_IDEMPOTENCY_KEY_CHARS`] or holding
    /// control characters.
    ///
    /// [`MAX_IDEMPOTENCY_KEY_CHARS`]: super::MAX_IDEMPOTENCY_KEY_CHARS
    #[error("an idempotency key must be at most 255 characters of visible text")]
    InvalidIdempotencyKey,
    /// An idempotent start in a caller's transaction met a run with the same
    /// key that the transaction cannot see: another transaction committed it
    /// after this one's snapshot was taken (`REPEATABLE READ` or
    /// `SERIALIZABLE`; Postgres reports a serialization failure), or it was
    /// deleted meanwhile. Nothing was started, and the caller's transaction is
    /// aborted: roll it back and run it again, and the start returns that run
    /// (or, at `READ COMMITTED`, this cannot happen for a visible run).
    #[error(
        "a run of `{workflow}` with this idempotency key was committed after this transaction's \
         snapshot was taken, so this transaction cannot see it; roll back and retry the \
         transaction (a serialization conflict: `is_transient` says so)"
    )]
    StartConflict {
        /// The workflow.
        workflow: String,
    },
    /// The workflow has no live step to start with.
    #[error("workflow `{workflow}` has no step to run")]
    NoSteps {
        /// The workflow's name.
        workflow: String,
    },
    /// Two registered workflow values share a durable name.
    #[error("workflow `{workflow}` is registered twice")]
    DuplicateWorkflow {
        /// The name.
        workflow: String,
    },
    /// A worker was built with nothing to run.
    #[error("a worker needs at least one registered workflow and one queue")]
    NothingToRun,
    /// An input or output could not be converted to or from JSON.
    #[error("JSON conversion failed")]
    Json(#[from] serde_json::Error),
    /// A row held a value this version cannot read (a status, a negative number).
    #[error("unexpected value in the database: {0}")]
    Corrupt(String),
    /// A statement that must change rows changed a different number of them.
    #[error("statement `{statement}` changed {found} rows, expected {expected}")]
    RowCount {
        /// Which statement.
        statement: &'static str,
        /// Rows expected.
        expected: u64,
        /// Rows changed.
        found: u64,
    },
    /// A connection setting is unknown, ill-formed, out of range or does not
    /// fit with another: in the URL or key-value string, in a libpq
    /// environment variable (then `setting` is the variable's name, e.g.
    /// `PGPORT`), or given to [`crate::DatabaseBuilder`].
    #[error("setting `{setting}` {problem}")]
    InvalidSetting {
        /// The setting to change, as libpq (or the builder method) names it.
        setting: String,
        /// What is wrong with it, and the allowed values.
        problem: String,
    },
    /// A certificate or key file a TLS setting names cannot be read, or holds
    /// nothing usable.
    #[error("cannot use `{setting}` file `{}`: {reason}", path.display())]
    UnreadableFile {
        /// `sslrootcert`, `sslcert` or `sslkey`.
        setting: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why: the operating system's error, or what the file lacks.
        reason: String,
    },
    /// Under `sslmode=verify-ca` or `verify-full` (or `require` with a root
    /// certificate), the server's certificate chain does not end at a root of
    /// `sslrootcert`, or is expired or otherwise invalid.
    #[error(
        "the certificate of server {host}:{port} is not trusted: {reason}; point `sslrootcert` at the CA that signed it"
    )]
    CertificateNotTrusted {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// Which check failed, in words.
        reason: String,
        /// The driver's error, with rustls's below it.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Under `sslmode=verify-full`, the server's certificate is trusted but does
    /// not name the host connected to.
    #[error(
        "the certificate of server {host}:{port} does not name host `{host}` (it names {}); connect by a name it lists, or check only the chain with `sslmode=verify-ca`",
        if presented.is_empty() { "other hosts".to_owned() } else { presented.join(", ") }
    )]
    HostNameMismatch {
        /// The host connected to, which the certificate should name.
        host: String,
        /// Its port.
        port: u16,
        /// The names the certificate gives (DNS names and IP addresses), when
        /// rustls reports them.
        presented: Vec<String>,
        /// The driver's error, with rustls's below it.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server does not offer TLS, and `sslmode` requires it.
    #[error(
        "server {host}:{port} does not accept TLS connections and `sslmode={sslmode}` requires TLS; turn `ssl` on in the server, or lower `sslmode` to `prefer`"
    )]
    TlsRefused {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The mode in force.
        sslmode: crate::connection::SslMode,
    },
    /// The server's `pg_hba.conf` lets in only encrypted connections
    /// (`hostssl`), and `sslmode=disable` asked for a plain one.
    #[error(
        "server {host}:{port} accepts only TLS connections and `sslmode={sslmode}` asked for a plain one; set `sslmode=require` (or `verify-full`)"
    )]
    TlsRequired {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The mode in force.
        sslmode: crate::connection::SslMode,
        /// The server's refusal.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The TLS handshake failed for a reason other than the certificate checks
    /// above (no protocol version or cipher in common, the server refused the
    /// client certificate, ...).
    #[error("the TLS handshake with server {host}:{port} failed: {}", driver_cause(.error))]
    Tls {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The driver's error, with rustls's below it; its words end the
        /// `Display`, so it is not also a `source()`.
        error: tokio_postgres::Error,
    },
    /// The server refused the password (SQLSTATE 28P01).
    #[error(
        "password authentication failed for user `{user}` at server {host}:{port}; check the URL's password or `PGPASSWORD`"
    )]
    WrongPassword {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The user.
        user: String,
        /// The server's refusal.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server asked for a password and none was given.
    #[error(
        "server {host}:{port} asks user `{user}` for a password and none is set; put it in the URL or `PGPASSWORD`"
    )]
    PasswordMissing {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The user.
        user: String,
    },
    /// No connection could be made to the server: refused, unreachable, the
    /// name does not resolve, or the connection dropped while starting.
    #[error("could not connect to server {host}:{port}: {}", driver_cause(.error))]
    Connect {
        /// The host connected to (the last one tried, of several).
        host: String,
        /// Its port.
        port: u16,
        /// The driver's error; its words (`Connection refused (os error
        /// 111)`) end the `Display`, so it is not also a `source()`.
        error: tokio_postgres::Error,
    },
    /// A pooler or proxy in front of the server (`PgBouncer` says
    /// "unsupported startup parameter") refused a startup parameter pgbus
    /// sends: its session settings go as startup `options` (`jit = off`, the
    /// server's side of the keepalives, a `statement_timeout`) unless
    /// [`crate::DatabaseBuilder::transaction_pooler`] is on.
    #[error(
        "server {host}:{port} refused a startup parameter ({message}); behind PgBouncer or another pooler, connect with `DatabaseBuilder::transaction_pooler(true)` (`pgbus --transaction-pooler`), which sends none, or add it to the pooler's `ignore_startup_parameters`"
    )]
    StartupParameterRefused {
        /// The pooler's host.
        host: String,
        /// Its port.
        port: u16,
        /// What it said.
        message: String,
    },
    /// The server did not finish the connection (TCP, TLS and authentication)
    /// within the connect timeout.
    #[error(
        "server {host}:{port} did not complete the connection within {after:?}; check the server is up, or raise `connect_timeout`"
    )]
    ConnectTimeout {
        /// The host connected to (the last one tried, of several).
        host: String,
        /// Its port.
        port: u16,
        /// The connect timeout.
        after: Duration,
    },
}

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Database(error)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        Self::Pool(error)
    }
}

#[cfg(feature = "sqlx")]
impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        Self::Sqlx(error)
    }
}

impl fmt::Debug for Error {
    /// The `Display` line, then each cause on a line of its own.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&safe_display(self))?;
        let mut source = std::error::Error::source(self);
        if source.is_some() {
            f.write_str("\n\nCaused by:")?;
        }
        while let Some(cause) = source {
            write!(f, "\n    {}", safe_display(cause))?;
            source = cause.source();
        }
        Ok(())
    }
}

impl Error {
    /// Whether no connection was had at all: the pool could not open one (the
    /// server refused it, for any reason: a role that may not log in, a
    /// database closed to connections, a wrong password) or gave up waiting
    /// for one. No statement ran, so nothing the call carried was judged: a
    /// step's outcome that meets this waits for a connection rather than
    /// being recorded as one the database refused.
    #[must_use]
    pub fn is_connection_failure(&self) -> bool {
        match self {
            // A closed pool is this process shutting down: waiting would not
            // end.
            Self::Pool(
                deadpool_postgres::PoolError::Closed
                | deadpool_postgres::PoolError::NoRuntimeSpecified,
            ) => false,
            Self::Pool(_) | Self::Connect { .. } | Self::ConnectTimeout { .. } => true,
            _ => false,
        }
    }

    /// Whether trying again may succeed: the connection failed or was closed
    /// (a server restart, a terminated backend, a network error), the server is
    /// starting, stopping or full, the pool timed out, or Postgres reported a
    /// serialization failure, a deadlock or a cancelled statement (57014, which
    /// `statement_timeout` raises), or a start in your transaction met
    /// [`Error::StartConflict`] (retry the whole transaction). A connection the
    /// server refused is transient as its SQLSTATE says (too many connections:
    /// yes; no such database: no). Constraint violations, values that
    /// do not convert, a dropped database and the like are not transient.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        /// Whether a driver error says the connection or the server went away,
        /// rather than that a statement or a value is wrong.
        fn connection_lost(error: &tokio_postgres::Error) -> bool {
            if error.is_closed() {
                return true;
            }
            if let Some(code) = error.code() {
                let code = code.code();
                // 08: connection exceptions. 57P01 admin shutdown (a restart or
                // pg_terminate_backend), 57P02 crash shutdown, 57P03 cannot
                // connect now (starting or stopping), 57P05 idle session timeout;
                // not 57P04, database dropped. 53300: too many connections.
                // 40001, 40P01: serialization failure, deadlock. 57014: a
                // statement cancelled (by `statement_timeout`, say while it
                // waited on a lock) may well pass when tried again.
                return code.starts_with("08")
                    || matches!(
                        code,
                        "57P01"
                            | "57P02"
                            | "57P03"
                            | "57P05"
                            | "53300"
                            | "40001"
                            | "40P01"
                            | "57014"
                    );
            }
            // No SQLSTATE: transient when the socket failed (connecting, reading,
            // writing), not when a value did not convert or a reply did not fit.
            std::error::Error::source(error)
                .is_some_and(<dyn std::error::Error>::is::<std::io::Error>)
        }
        match self {
            Self::Database(error) | Self::Pool(deadpool_postgres::PoolError::Backend(error)) => {
                connection_lost(error)
            }
            // Refused by the socket: transient; by the server: as its SQLSTATE
            // says (too many connections, starting up: yes; no such
            // database: no).
            Self::Connect { error, .. } => error.code().is_none() || connection_lost(error),
            Self::Pool(deadpool_postgres::PoolError::Timeout(_))
            | Self::ConnectTimeout { .. }
            | Self::StartConflict { .. } => true,
            _ => false,
        }
    }
}
