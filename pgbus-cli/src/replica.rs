//! A read replica of the database (`--replica-url`, `PGBUS_REPLICA_URL`):
//! a [`Database`] built with the same settings as the primary's, for the
//! reads that may lag.

use std::time::Duration;

use pgbus_runtime::{Clock, Database, Schema};

use crate::{Cli, Command};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a command reaches its databases: what the primary is built with
/// (schema, pooler, timeouts), which a replica is built with too.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reach<'a> {
    /// The schema pgbus keeps its tables in.
    pub(crate) schema: &'a str,
    /// Behind a transaction-mode pooler: no startup options, so no
    /// timeouts sent (set them on the role there).
    pub(crate) transaction_pooler: bool,
    /// The longest a statement may run, as the command resolved it.
    pub(crate) statement_timeout: Duration,
    /// The longest a statement may wait for a lock.
    pub(crate) lock_timeout: Duration,
}

/// The replica at `url`, on the database's clock, with `reach`'s schema and
/// timeouts (the replica's own clock: its `clock_timestamp()` is the
/// primary's time, give or take the hosts' clocks). Nothing is read to
/// check it: a wrong URL shows on the first page, and a page's header says
/// how far behind the replica is.
///
/// # Errors
/// A schema name that is not an identifier; a URL that does not parse.
pub(crate) async fn connect_replica(url: &str, reach: Reach<'_>) -> Result<Database, BoxError> {
    let builder = Database::builder(url)
        .schema(Schema::new(reach.schema)?)
        .clock(Clock::Database);
    let db = if reach.transaction_pooler {
        builder.transaction_pooler(true).connect().await?
    } else {
        builder
            .lock_timeout(reach.lock_timeout)
            .statement_timeout(reach.statement_timeout)
            .connect()
            .await?
    };
    Ok(db)
}

/// The dashboard's replica (`--replica-url`, `PGBUS_REPLICA_URL`; empty is
/// none), built as `cli` builds the primary: its schema, pooler setting,
/// lock timeout and statement timeout (`default_statement_timeout` when
/// none is given, as for every command but `migrate`). `None` for another
/// command, or without a URL.
///
/// # Errors
/// As [`connect_replica`].
pub(crate) async fn of_dashboard(
    cli: &Cli,
    default_statement_timeout: Duration,
) -> Result<Option<Database>, BoxError> {
    let Command::Dashboard {
        replica_url: Some(url),
        ..
    } = &cli.command
    else {
        return Ok(None);
    };
    if url.is_empty() {
        return Ok(None);
    }
    let reach = Reach {
        schema: &cli.schema,
        transaction_pooler: cli.transaction_pooler,
        statement_timeout: cli.statement_timeout.unwrap_or(default_statement_timeout),
        lock_timeout: cli.lock_timeout,
    };
    Ok(Some(connect_replica(url, reach).await?))
}
