//! `pgbus`: what an operator on call needs to see and steer runs without
//! writing SQL. Reads `DATABASE_URL` (and `PGBUS_SCHEMA`, default `pgbus`).
//!
//! Errors are one plain line on standard error and exit code 1; a bad command
//! line exits with 2; `deploy-check` exits with 3 when some run in flight
//! would pause or wait. Listings go through a pager (`$PAGER`, else `less -FRX`)
//! and carry colours only when standard output is a terminal (and `NO_COLOR`
//! is unset).

mod commands;
mod dashboard;
mod output;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use pgbus_runtime::window::Window;
use pgbus_runtime::{RunId, RunStatus};

/// See and steer pgbus workflow runs.
#[derive(Debug, Parser)]
#[command(name = "pgbus", version, about, max_term_width = 100)]
struct Cli {
    /// The database, as a libpq URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,

    /// A replica of the database, as a libpq URL: `runs`, `show` (and its
    /// `--follow`), `stats` and `workers` read there, in read-only sessions
    /// with the same settings and timeouts, and say on standard error how
    /// far behind it is; so do the dashboard's pages, each saying in its
    /// header how far behind it is (the pages shown right after an action
    /// read the primary). Actions, `schedules`, `sweep`, `deploy-check` and
    /// `migrate` always use `--database-url`.
    #[arg(long, global = true, env = "PGBUS_REPLICA_URL", hide_env_values = true)]
    replica_url: Option<String>,

    /// The schema pgbus keeps its tables in.
    #[arg(long, env = "PGBUS_SCHEMA", default_value = "pgbus")]
    schema: String,

    /// The URL reaches the database through a transaction-mode pooler
    /// (PgBouncer `pool_mode = transaction`): send every statement unnamed and
    /// no startup options.
    #[arg(long, env = "PGBUS_TRANSACTION_POOLER")]
    transaction_pooler: bool,

    /// The longest any one statement may run (`10s`; `migrate` has none
    /// unless given): a query past it is cancelled by the server and the
    /// command says so and exits 1. Not sent through a transaction-mode
    /// pooler; set it on the role there.
    #[arg(long, global = true, env = "PGBUS_STATEMENT_TIMEOUT", value_parser = parse_timeout)]
    statement_timeout: Option<Duration>,

    /// The longest a statement may wait for a lock another session holds
    /// (`5s`): past it, the command says so and exits 1 instead of hanging.
    #[arg(
        long,
        global = true,
        env = "PGBUS_LOCK_TIMEOUT",
        default_value = "5s",
        value_parser = parse_timeout
    )]
    lock_timeout: Duration,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Applies pending migrations (safe to run from many places at once).
    Migrate,
    /// Lists runs, newest first, marking those no live worker can run.
    Runs(RunsArgs),
    /// Shows a run: its steps and attempts, its timeline, signals, batches
    /// and events, and what no live worker has when none can run its due step.
    Show {
        /// The run id.
        run: i64,
        /// JSON (`{"run": ..., "timeline": [...], "counts": {...}}`) instead of text.
        #[arg(long, conflicts_with = "follow")]
        json: bool,
        /// After the run, print its new events and status changes as they
        /// come (read every second), until it finishes or is cancelled
        /// (exit 0); a paused run is followed on. Ctrl-C stops (exit 130).
        #[arg(long)]
        follow: bool,
        /// How many of the latest attempts, events and signals to show (1 to
        /// 5000); `counts` in the JSON says how many there are.
        #[arg(long, default_value_t = 200, value_parser = parse_last)]
        last: usize,
        /// The most JSON text, in bytes, of a value (the input, an output, a
        /// signal payload) to read (1 to 268435456, 256 MiB, more than any
        /// stored value); a longer one is left out
        /// and named with its length (`omitted` in the JSON).
        #[arg(long, default_value_t = 16_384, value_parser = parse_value_bytes)]
        value_bytes: usize,
        /// How old a heartbeat may be for its worker to count as live when
        /// `show` says whether any worker can run the run's due step: the
        /// workers' lost-worker threshold (default 30s).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        lost_worker_threshold: Duration,
    },
    /// Pauses a run (its running step finishes; nothing more is claimed).
    Pause(Action),
    /// Resumes a paused run (a failed step runs again as a new attempt).
    Resume(Action),
    /// Cancels a run and its open fan-out children.
    Cancel(Action),
    /// Skips the current step of a paused run and resumes it.
    Skip(Action),
    /// Sends a signal to a run.
    Signal {
        /// The run id.
        run: i64,
        /// The signal's name.
        name: String,
        /// Its payload, as JSON (default `null`).
        #[arg(long, conflicts_with = "payload_file")]
        payload: Option<String>,
        /// Its payload, as JSON, from a file (`-`: standard input), for
        /// payloads longer than a command line takes.
        #[arg(long)]
        payload_file: Option<std::path::PathBuf>,
        /// Send it even if no step of the run's workflow waits for this
        /// name: for a step a later version of the workflow will add.
        /// Without it, such a name is refused with the names that are
        /// waited for.
        #[arg(long)]
        unchecked: bool,
    },
    /// Runs the sweep once: repairs stalled attempts, resolves stuck batches,
    /// applies retention.
    Sweep {
        /// What a stalled attempt's run gets: `pause` or `cancel` (without the
        /// workflows' code, a stalled attempt cannot be reattempted).
        #[arg(long, default_value = "pause", value_parser = ["pause", "cancel"])]
        stall_action: String,
        /// How long a worker may go without a heartbeat before its attempts
        /// count as lost: the workers' own setting (default 30s; at least 10s,
        /// two default heartbeats, so live workers are not taken for lost).
        #[arg(long, default_value = "30s", value_parser = parse_lost_worker_threshold)]
        lost_worker_threshold: Duration,
        /// Also delete finished and cancelled runs last changed longer ago than
        /// this (`30d`; `forever` deletes nothing). Without it, nothing is
        /// deleted (the workers' sweeps apply their own retention).
        #[arg(long, value_parser = parse_retention)]
        retention: Option<Retention>,
    },
    /// Serves the web dashboard: runs, a run's timeline, insights, and the
    /// operator actions as forms.
    Dashboard {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: std::net::SocketAddr,
        /// The access token every request must carry (a `?token=` link once,
        /// or an `Authorization: Bearer` header).
        /// At least 16 characters. Prefer `PGBUS_DASHBOARD_TOKEN` or
        /// `--token-file`: a flag shows in `ps`. Without one, a token is
        /// made at start and its link printed.
        #[arg(long, env = "PGBUS_DASHBOARD_TOKEN", hide_env_values = true, value_parser = parse_token)]
        token: Option<String>,
        /// Reads the access token from a file (its first line).
        #[arg(long, conflicts_with = "token")]
        token_file: Option<std::path::PathBuf>,
        /// Serves without a token, to loopback names only: for a machine
        /// whose every local user and process may steer every run.
        #[arg(long, conflicts_with_all = ["token", "token_file", "public_origin"])]
        no_token: bool,
        /// The origin browsers use behind a reverse proxy, as
        /// `scheme://host[:port]` (`https://ops.example.com`): its forms are
        /// accepted whatever `Host` the proxy sends, and over `https` the
        /// cookies are `Secure` and `__Host-` prefixed.
        #[arg(long, env = "PGBUS_PUBLIC_ORIGIN", value_parser = parse_origin)]
        public_origin: Option<String>,
        /// The retention age the workers use; longer insight windows are cut to it.
        #[arg(long, env = "PGBUS_RETENTION", default_value = "30d", value_parser = parse_retention)]
        retention: Retention,
        /// How old a heartbeat may be for its worker to count as live (the
        /// workers page, and whether a run's due step has a worker that can
        /// run it): the workers' lost-worker threshold (default 30s).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        lost_worker_threshold: Duration,
    },
    /// Lists the live workers: name, host, pid, queues, concurrency, the
    /// workflows each registered (with the definition digest's first 12
    /// characters), attempts in flight and the age of its last heartbeat.
    Workers {
        /// How old a heartbeat may be for its worker to count as live: the
        /// workers' lost-worker threshold (default 30s).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        lost_worker_threshold: Duration,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// JSON, one array, instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Before a deploy: what a worker's definitions (the JSON document its
    /// `--print-definitions` hook writes, `Worker::definitions`) would do to
    /// the runs in flight, once its workers replace every live worker of its
    /// workflows. Per workflow and digest, how many runs advance, skip a
    /// gravestone, miss a step the new version added, pause with
    /// `StepNotDefined`, or wait on a row nothing will take. Exits 3 when some
    /// run would pause or wait (1: an error, a bad FILE included).
    DeployCheck {
        /// The definitions document (`-`: standard input).
        file: std::path::PathBuf,
        /// How old a heartbeat may be for its worker to count as live: the
        /// workers' lost-worker threshold (default 30s).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        lost_worker_threshold: Duration,
        /// JSON (`{"workflows": [...], "counts": {...}, ...}`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Schedules: list, show, create, update, pause, resume, delete.
    Schedules {
        #[command(subcommand)]
        command: commands::ScheduleCommand,
    },
    /// Runs started, finished, paused and cancelled per time bucket.
    Stats {
        /// The window: `1h` (5-minute buckets), `24h` (1 hour), `7d` (6 hours)
        /// or `30d` (1 day).
        #[arg(long, default_value = "24h", value_parser = parse_window)]
        window: Window,
        /// The retention age the workers use; a longer window is cut to it.
        #[arg(long, env = "PGBUS_RETENTION", default_value = "30d", value_parser = parse_retention)]
        retention: Retention,
        /// Only runs of workflows whose name starts with this text (byte for
        /// byte, no wildcards), as `runs --workflow-prefix`; a full name
        /// counts that workflow (and any whose name it begins).
        #[arg(long)]
        workflow_prefix: Option<String>,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// What `runs` lists.
#[derive(Debug, clap::Args)]
struct RunsArgs {
    /// Only runs of this workflow (its name exactly; a `*` is no wildcard,
    /// see `--workflow-prefix`).
    #[arg(long)]
    workflow: Option<String>,
    /// Only runs of workflows whose name starts with this (`orders.`).
    #[arg(long, conflicts_with = "workflow")]
    workflow_prefix: Option<String>,
    /// Only top-level runs: those no fan-out started.
    #[arg(long, conflicts_with = "parent")]
    top_level: bool,
    /// Only the children of this run: the runs its fan-out steps started.
    #[arg(long, value_name = "RUN")]
    parent: Option<i64>,
    /// Only the run started with this idempotency key (one per workflow).
    #[arg(long, value_name = "IDEMPOTENCY_KEY")]
    key: Option<String>,
    /// Only runs in this status (ready, performing, paused, finished, cancelled).
    #[arg(long, value_parser = parse_status)]
    status: Option<RunStatus>,
    /// Only runs created within this long (`30m`, `24h`, `7d`).
    #[arg(long, value_parser = parse_duration)]
    since: Option<Duration>,
    /// Only runs created longer ago than this (by creation, not last change).
    #[arg(long, value_parser = parse_duration)]
    older_than: Option<Duration>,
    /// Only runs with a lower id: the next page after a listing that ended at
    /// this id.
    #[arg(long)]
    before: Option<i64>,
    /// At most this many (1 to 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    /// How old a heartbeat may be for its worker to count as live when a
    /// run is marked as one no live worker can run: the workers' lost-worker
    /// threshold (default 30s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    lost_worker_threshold: Duration,
    /// JSON, one array, instead of a table.
    #[arg(long)]
    json: bool,
}

/// An operator action's arguments.
#[derive(Debug, clap::Args)]
struct Action {
    /// The run id.
    run: i64,
    /// Why: kept on the run's event (1 to 10,000 characters).
    #[arg(long, value_parser = parse_reason)]
    reason: String,
    /// Who: kept on the event (default `cli:$USER`).
    #[arg(long)]
    actor: Option<String>,
}

/// How long ended runs are kept.
#[derive(Debug, Clone, Copy)]
struct Retention(Option<Duration>);

fn parse_duration(text: &str) -> Result<Duration, String> {
    pgbus_core::parse_duration_ms(text)
        .map(Duration::from_millis)
        .map_err(|e| e.to_string())
}

fn parse_last(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=5_000).contains(&n) => Ok(n),
        _ => Err("a whole number from 1 to 5000".to_owned()),
    }
}

fn parse_value_bytes(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=256 << 20).contains(&n) => Ok(n),
        _ => Err("a whole number of bytes from 1 to 268435456 (256 MiB)".to_owned()),
    }
}

/// An access token: at least 16 characters, none of them whitespace or
/// control characters (an empty one means none).
pub(crate) fn parse_token(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Ok(String::new());
    }
    if text.chars().count() < 16 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "an access token is at least 16 characters, without whitespace (e.g. `openssl rand -hex 16`)"
                .to_owned(),
        );
    }
    Ok(text.to_owned())
}

/// `scheme://host[:port]`, nothing after it, as a browser's `Origin` reads.
fn parse_origin(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    match rest {
        Some(host)
            if !host.is_empty()
                && !host.contains(['/', '?', '#', '@'])
                && !host.chars().any(char::is_whitespace) =>
        {
            Ok(text.to_ascii_lowercase())
        }
        _ => {
            Err("an origin is `https://host` or `http://host:port`, with nothing after".to_owned())
        }
    }
}

/// A duration above zero (the server counts these in milliseconds; zero
/// would mean no limit).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse_duration(text)?;
    if timeout < Duration::from_millis(1) {
        return Err("at least 1ms".to_owned());
    }
    Ok(timeout)
}

fn parse_lost_worker_threshold(text: &str) -> Result<Duration, String> {
    let threshold = parse_duration(text)?;
    if threshold < Duration::from_secs(10) {
        return Err("at least 10s: a shorter threshold takes live workers for lost".to_owned());
    }
    Ok(threshold)
}

fn parse_retention(text: &str) -> Result<Retention, String> {
    if text == "forever" {
        Ok(Retention(None))
    } else {
        parse_duration(text).map(|d| Retention(Some(d)))
    }
}

/// The client's rule for a reason, checked before anything connects.
fn parse_reason(text: &str) -> Result<String, String> {
    pgbus_runtime::client::check_reason(text)
        .map(|()| text.to_owned())
        .map_err(|e| e.to_string())
}

fn parse_window(text: &str) -> Result<Window, String> {
    text.parse()
        .map_err(|e: pgbus_runtime::window::UnknownWindow| e.to_string())
}

fn parse_status(text: &str) -> Result<RunStatus, String> {
    text.parse().map_err(|_| {
        let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown status `{text}`: use {}", all.join(", "))
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The dashboard serves many requests at once: a thread per core, so one
    // slow page never holds the others; every other command is one request.
    let mut builder = if matches!(cli.command, Command::Dashboard { .. }) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&error),
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(error) => fail(error.as_ref()),
    }
}

/// Prints `error` and its causes on one line; exit code 1.
fn fail(error: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("pgbus: {}", commands::visible(&commands::chain(error)));
    ExitCode::FAILURE
}

impl Action {
    fn run_id(&self) -> RunId {
        RunId(self.run)
    }
}
