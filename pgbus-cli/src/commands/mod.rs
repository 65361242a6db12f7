//! What each subcommand does.

use chrono::{DateTime, Utc};
use std::time::Duration;

use pgbus_runtime::view::ReplicaLag;
use pgbus_runtime::{Clock, Database, Schema};

use crate::output::Output;
use crate::{Cli, Command};

mod act;
mod deploy;
mod runs;
mod schedules;
mod show;
mod stats;
mod sweep;
mod text;
mod workers;

use act::{Verb, act, read_payload, signal};
use deploy::{deploy_check, read_definitions};
use runs::runs;
pub(crate) use schedules::ScheduleCommand;
use schedules::schedules;
use show::show_run;
pub(crate) use show::{
    Cut, SHOWN, SHOWN_AT_MOST, VALUE_BYTES, cannot_run, held_text, short_digest,
};
use stats::stats;
use sweep::sweep;
pub(crate) use text::{clip, defang, json_visible, time, took, value_text, visible};
pub(crate) use workers::SHORT_DIGEST;
use workers::workers;

/// The statement timeout of every command but `migrate`, unless one is given:
/// below the dashboard's 15 s page timeout, so the server has cancelled a
/// page's query before the page gives up on it.
const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the command line's command: its exit code (success, or 3 from
/// `deploy-check` when some run would pause or wait), or its error, with a
/// hint where one helps.
pub(crate) async fn run(cli: Cli) -> Result<std::process::ExitCode, BoxError> {
    let schema = cli.schema.clone();
    // The server an error names is the one the command talked to.
    let url = reads_on_replica(&cli)
        .unwrap_or(&cli.database_url)
        .to_owned();
    execute(cli)
        .await
        .map_err(|error| hint(error, &url, &schema))
}

/// `error` with what an operator would ask next: which server, or whether
/// the schema was migrated.
fn hint(error: BoxError, url: &str, schema: &str) -> BoxError {
    let text = chain(error.as_ref());
    if text.contains("; is the schema migrated? run `Database::migrate` (or `pgbus migrate`)") {
        // The runtime's own hint names no schema; this one does.
        let text = text.replace(
            "; is the schema migrated? run `Database::migrate` (or `pgbus migrate`)",
            "",
        );
        format!("{text} (is schema {schema} migrated? run `pgbus migrate`)").into()
    } else if text.contains("could not get a database connection") {
        // Through pgbus's own parser, so URLs with libpq's TLS settings
        // (which tokio-postgres alone refuses) still say where they point.
        let at = pgbus_runtime::connection::servers(url)
            .ok()
            .filter(|servers| !servers.is_empty())
            .map(|servers| format!(" (server {})", servers.join(",")))
            .unwrap_or_default();
        format!("{text}{at}").into()
    } else if text.contains("lock timeout") {
        format!(
            "{text} (another session holds a lock this command needs; `--lock-timeout` waits longer)"
        )
        .into()
    } else if text.contains("statement timeout") {
        format!("{text} (`--statement-timeout` allows longer)").into()
    } else {
        error
    }
}

/// An error and its causes on one line.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line.replace('\n', " ")
}

/// The database's time: what stored times are on, whatever the host's clock
/// says. Sent unnamed, so it also works behind a transaction-mode pooler.
pub(crate) async fn db_now(db: &Database) -> Result<DateTime<Utc>, BoxError> {
    let client = db.pool().get().await?;
    Ok(client
        .query_typed_one("SELECT clock_timestamp()", &[])
        .await?
        .get(0))
}

/// The access token in the first line of `path`, by the flag's rule.
fn token_from_file(path: &std::path::Path) -> Result<String, BoxError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let first = text.lines().next().unwrap_or_default().trim();
    if first.is_empty() {
        // An empty token means none, which would turn the guard off.
        return Err(format!(
            "the token file {} holds no token on its first line",
            path.display()
        )
        .into());
    }
    Ok(crate::parse_token(first).map_err(|e| format!("{}: {e}", path.display()))?)
}

/// The database, with the command's timeouts.
async fn connect(cli: &Cli) -> Result<Database, BoxError> {
    session(cli, &cli.database_url, false).await
}

/// The replica at `url`, for a command of `cli` that only reads: the
/// primary's settings and timeouts, in read-only sessions (behind a
/// transaction-mode pooler, where no session setting is sent, set
/// `default_transaction_read_only` on the role).
pub(crate) async fn connect_replica(cli: &Cli, url: &str) -> Result<Database, BoxError> {
    // Said as the replica's: the same words for the primary would send an
    // operator to the wrong server.
    session(cli, url, true)
        .await
        .map_err(|error| format!("the replica (--replica-url): {}", chain(error.as_ref())).into())
}

/// The replica URL `cli` gives, if any (an empty `PGBUS_REPLICA_URL` is none).
pub(crate) fn replica_url(cli: &Cli) -> Option<&str> {
    cli.replica_url
        .as_deref()
        .filter(|url| !url.trim().is_empty())
}

/// The replica URL when `cli`'s command reads there: `runs`, `show`,
/// `stats` and `workers`, which only read. Such a command never reaches the
/// primary: a loaded primary is why an operator reads elsewhere.
fn reads_on_replica(cli: &Cli) -> Option<&str> {
    let reads = matches!(
        cli.command,
        Command::Runs(_) | Command::Show { .. } | Command::Stats { .. } | Command::Workers { .. }
    );
    replica_url(cli).filter(|_| reads)
}

/// The dashboard's access token: from its file, else as given (an empty
/// `PGBUS_DASHBOARD_TOKEN=` is none given), else none when `no_token`, else
/// a fresh one.
fn dashboard_token(
    token_file: Option<std::path::PathBuf>,
    token: Option<String>,
    no_token: bool,
) -> Result<crate::dashboard::Token, BoxError> {
    let token = token.filter(|t| !t.is_empty());
    Ok(match (token_file, token) {
        (Some(path), _) => crate::dashboard::Token::Given(token_from_file(&path)?),
        (None, Some(token)) => crate::dashboard::Token::Given(token),
        (None, None) if no_token => crate::dashboard::Token::None,
        (None, None) => crate::dashboard::Token::made(),
    })
}

/// The replica the dashboard reads its pages off, when one is given; its
/// actions, and the pages right after them, use the primary.
async fn dashboard_replica(cli: &Cli) -> Result<Option<Database>, BoxError> {
    match (&cli.command, replica_url(cli)) {
        (Command::Dashboard { .. }, Some(url)) => Ok(Some(connect_replica(cli, url).await?)),
        _ => Ok(None),
    }
}

/// The database `cli`'s command talks to: the replica for a read when one
/// is given (saying on standard error how far behind it is), else the
/// primary.
async fn open(cli: &Cli) -> Result<Database, BoxError> {
    match reads_on_replica(cli) {
        Some(url) => {
            let db = connect_replica(cli, url).await?;
            eprintln!("{}", replica_lag_line(&db).await?);
            Ok(db)
        }
        None => connect(cli).await,
    }
}

/// How far behind the replica `db` is, as the line a command prints on
/// standard error before it reads there.
pub(crate) async fn replica_lag_line(db: &Database) -> Result<String, BoxError> {
    Ok(match db.client().replica_lag().await? {
        ReplicaLag::Behind { ms } => {
            let behind = format!(
                "replica {:.1} s behind",
                Duration::from_millis(ms.unsigned_abs()).as_secs_f64()
            );
            // Measured from the last transaction it replayed: an idle
            // primary makes it grow though nothing is missing.
            format!("{behind} (since its last replayed transaction)")
        }
        ReplicaLag::NothingReplayed => "replica: has replayed nothing yet".to_owned(),
        // `NotAReplica`, and whatever a later version adds.
        _ => "replica: not in recovery (reading a primary)".to_owned(),
    })
}

/// A database at `url` with the command's settings and timeouts; read-only
/// sessions when `read_only`.
async fn session(cli: &Cli, url: &str, read_only: bool) -> Result<Database, BoxError> {
    let schema = Schema::new(&cli.schema)?;
    let builder = Database::builder(url).schema(schema).clock(Clock::Database);
    let db = if cli.transaction_pooler {
        builder.transaction_pooler(true).connect().await?
    } else {
        let builder = builder.read_only(read_only);
        // No command waits on a lock or a slow query without end: the server
        // cancels it, and the command says so in one line.
        let statement_timeout = match &cli.command {
            Command::Migrate => cli.statement_timeout,
            _ => Some(cli.statement_timeout.unwrap_or(DEFAULT_STATEMENT_TIMEOUT)),
        };
        // Migrations wait for each other's advisory lock, as they should:
        // `migrate` runs from many places at once.
        let builder = if matches!(cli.command, Command::Migrate) {
            builder
        } else {
            builder.lock_timeout(cli.lock_timeout)
        };
        match statement_timeout {
            Some(timeout) => builder.statement_timeout(timeout),
            None => builder,
        }
        .connect()
        .await?
    };
    Ok(db)
}

async fn execute(cli: Cli) -> Result<std::process::ExitCode, BoxError> {
    // A bad definitions file is said before anything connects.
    let definitions = match &cli.command {
        Command::DeployCheck { file, .. } => Some(read_definitions(file)?),
        _ => None,
    };
    let db = open(&cli).await?;
    let replica = dashboard_replica(&cli).await?;
    let out = Output::detect();
    match cli.command {
        Command::Migrate => {
            db.migrate().await?;
            out.line(&format!("schema {} is up to date", db.schema()))?;
        }
        Command::Runs(args) => runs(&db, out, args).await?,
        Command::Show {
            run,
            json,
            follow,
            last,
            value_bytes,
            lost_worker_threshold,
        } => {
            let read = Cut::read(last, value_bytes).lost_worker_threshold(lost_worker_threshold);
            if follow {
                return show::follow(&db, out, run, last, read).await;
            }
            show_run(&db, out, run, json, last, read, false).await?;
        }
        Command::Pause(action) => act(&db, out, &action, Verb::Pause).await?,
        Command::Resume(action) => act(&db, out, &action, Verb::Resume).await?,
        Command::Cancel(action) => act(&db, out, &action, Verb::Cancel).await?,
        Command::Skip(action) => act(&db, out, &action, Verb::Skip).await?,
        Command::Signal {
            run,
            name,
            payload,
            payload_file,
            unchecked,
        } => {
            let payload = match (payload, payload_file) {
                (_, Some(path)) => Some(read_payload(&path)?),
                (payload, None) => payload,
            };
            signal(&db, out, run, &name, payload, unchecked).await?;
        }
        Command::Sweep {
            stall_action,
            lost_worker_threshold,
            retention,
        } => {
            let retention = retention.and_then(|r| r.0);
            sweep(&db, out, &stall_action, lost_worker_threshold, retention).await?;
        }
        Command::Dashboard {
            bind,
            token,
            token_file,
            no_token,
            public_origin,
            retention,
            lost_worker_threshold,
            ..
        } => {
            let token = dashboard_token(token_file, token, no_token)?;
            let settings = crate::dashboard::Settings {
                bind,
                token,
                retention: retention.0,
                public_origin,
                lost_worker_threshold,
                replica,
            };
            crate::dashboard::serve(db, settings).await?;
        }
        Command::Stats {
            window,
            retention,
            workflow_prefix,
            json,
        } => stats(&db, out, window, retention, workflow_prefix, json).await?,
        Command::Workers {
            lost_worker_threshold,
            limit,
            json,
        } => workers(&db, out, lost_worker_threshold, limit, json).await?,
        Command::Schedules { command } => schedules(&db, out, command).await?,
        Command::DeployCheck {
            file: _,
            lost_worker_threshold,
            json,
        } => {
            if let Some(definitions) = &definitions {
                return deploy_check(&db, out, definitions, lost_worker_threshold, json).await;
            }
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
