//! How [`Error`] is made from the drivers' errors, printed with its causes,
//! and classified.

use std::fmt;

use super::Error;
use super::step_error::safe_display;

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

/// What to do about a run nobody can run, by what is missing.
pub(super) fn unrunnable_hint(unrunnable: &crate::Unrunnable) -> String {
    match unrunnable.missing {
        crate::view::Missing::Step => format!(
            "register a definition of `{}` that has step `{}` (the version the run started \
             under), or keep the step as a gravestone (`removed_step!({})`) so runs skip it",
            unrunnable.workflow, unrunnable.step_name, unrunnable.step_name
        ),
        crate::view::Missing::Queue => format!(
            "run a worker of `{}` that claims from queue `{}` (`WorkerBuilder::queue`, \
             `TestEnv::queue` in a test), or give clients and workers the same overrides: a \
             queue the client's overrides or start options give and the workers' do not is \
             served by none of them",
            unrunnable.workflow, unrunnable.queue
        ),
        _ => format!(
            "register `{}` with `TestEnv::register` in a test or `WorkerBuilder::register` on \
             a worker (the workflows of fan_out children too)",
            unrunnable.workflow
        ),
    }
}

/// `: "why"` after a run's state in an error line, the reason escaped as
/// Rust escapes a string (text from runs never breaks a log line); nothing
/// without one.
pub(super) fn describe_reason(reason: Option<&str>) -> String {
    reason.map(|r| format!(": {r:?}")).unwrap_or_default()
}

/// ` on error `Class`: "message"` after a paused run's reason; nothing
/// without an error.
pub(super) fn describe_error(class: Option<&str>, message: Option<&str>) -> String {
    match (class, message) {
        (Some(class), Some(message)) => format!(" on error `{class}`: {message:?}"),
        (Some(class), None) => format!(" on error `{class}`"),
        (None, Some(message)) => format!(" on error {message:?}"),
        (None, None) => String::new(),
    }
}
