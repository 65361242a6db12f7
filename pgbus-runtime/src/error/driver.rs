//! A driver's, sqlx's or the pool's error in full, for [`Error`](super::Error)'s
//! one-line `Display`.

use super::display_chain;
use super::step_error::safe_display;

/// A driver error in full, without a prefix: what failed, and the server's severity, message,
/// SQLSTATE, detail and hint, or the cause below it (the socket's error, what
/// did not convert).
pub(super) fn describe_driver_error(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str("; detail: ");
            text.push_str(detail);
        }
        if let Some(hint) = db.hint() {
            text.push_str("; hint: ");
            text.push_str(hint);
        }
        match db.code().code() {
            // Every statement of pgbus names only its own schema's tables and
            // functions: a missing schema (3F000), table (42P01) or function
            // (42883, a schema migrated by an older version) is a migration
            // not run.
            "3F000" | "42P01" | "42883" => text
                .push_str("; is the schema migrated? run `Database::migrate` (or `pgbus migrate`)"),
            // A named statement gone or clashing: what a transaction-mode
            // pooler does to the statement cache of a direct connection.
            "26000" | "42P05" => text.push_str(
                "; behind a transaction-mode pooler? connect with \
                 `DatabaseBuilder::transaction_pooler(true)` (`pgbus --transaction-pooler`)",
            ),
            _ => {}
        }
        return text;
    }
    let mut text = safe_display(error);
    if let Some(cause) = std::error::Error::source(error) {
        text.push_str(": ");
        text.push_str(&display_chain(cause));
    }
    text
}

/// What lies below a driver error (the socket's or rustls's words), or the
/// driver's own words when nothing does.
pub(super) fn driver_cause(error: &tokio_postgres::Error) -> String {
    if error.as_db_error().is_some() {
        return describe_driver_error(error);
    }
    match std::error::Error::source(error) {
        Some(cause) => display_chain(cause),
        None => describe_driver_error(error),
    }
}

/// A sqlx error in full: the server's severity-free message and SQLSTATE,
/// as [`describe_driver_error`] gives them, or sqlx's own words.
#[cfg(feature = "sqlx")]
pub(super) fn describe_sqlx_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("database error (sqlx): {} (SQLSTATE {code})", db.message()),
            None => format!("database error (sqlx): {}", db.message()),
        },
        other => format!("database error (sqlx): {}", display_chain(other)),
    }
}

/// A pool error in full: which wait ran out, or why a new connection failed.
pub(super) fn describe_pool_error(error: &deadpool_postgres::PoolError) -> String {
    use deadpool_postgres::{PoolError, TimeoutType};
    match error {
        PoolError::Backend(error) => format!(
            "could not get a database connection: {}",
            describe_driver_error(error)
        ),
        PoolError::Timeout(TimeoutType::Wait) => {
            "could not get a database connection: every pooled connection stayed in use \
             past the pool's wait timeout (a larger pool, or fewer concurrent callers)"
                .to_owned()
        }
        PoolError::Timeout(TimeoutType::Create) => {
            "could not get a database connection: connecting took longer than the pool's \
             create timeout"
                .to_owned()
        }
        PoolError::Timeout(TimeoutType::Recycle) => {
            "could not get a database connection: checking a pooled connection took \
             longer than the pool's recycle timeout"
                .to_owned()
        }
        PoolError::Closed => "could not get a database connection: the pool is closed".to_owned(),
        other => format!(
            "could not get a database connection: {}",
            display_chain(other)
        ),
    }
}
