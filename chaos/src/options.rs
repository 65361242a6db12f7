//! Command-line options of both modes.

use std::path::PathBuf;
use std::time::Duration;

/// What `--help` prints.
pub(crate) const USAGE: &str = "\
pgbus-chaos: kill workers and restart PostgreSQL under load, then check every run

usage: pgbus-chaos [options]

  --runs N          runs to start, each of 5 steps            (default 3000)
  --workers N       worker processes at any time              (default 4)
  --concurrency N   step bodies each worker runs at once      (default 8)
  --kills N         workers killed with SIGKILL               (default 10)
  --restarts N      PostgreSQL restarts (immediate stop)      (default 2)
  --deadline SECS   give up, and fail, after this long        (default 600)
  --seed N          seed of the kill and restart schedule     (default: the clock)
  --pg-bin DIR      PostgreSQL server binaries (initdb, pg_ctl)
                    (default: the newest /usr/lib/postgresql/*/bin)
  --keep            keep the cluster's directory and logs afterwards

The supervisor runs a private PostgreSQL cluster in a temporary directory on a
free port (as the `postgres` user when run as root), so restarting it disturbs
no other server. It exits 0 when every check passed, 1 when one failed or the
deadline passed, 2 when it could not set up.";

/// The supervisor's options.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) runs: u32,
    pub(crate) workers: u32,
    pub(crate) concurrency: u32,
    pub(crate) kills: u32,
    pub(crate) restarts: u32,
    pub(crate) deadline: Duration,
    pub(crate) seed: Option<u64>,
    pub(crate) pg_bin: Option<PathBuf>,
    pub(crate) keep: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            runs: 3000,
            workers: 4,
            concurrency: 8,
            kills: 10,
            restarts: 2,
            deadline: Duration::from_mins(10),
            seed: None,
            pg_bin: None,
            keep: false,
        }
    }
}

impl Options {
    /// The options, or `None` for `--help`.
    pub(crate) fn parse(args: &[String]) -> Result<Option<Self>, String> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| format!("`{flag}` needs a value; see --help"))
            };
            match flag.as_str() {
                "--help" | "-h" => return Ok(None),
                "--runs" => options.runs = number(flag, value()?)?,
                "--workers" => options.workers = number(flag, value()?)?,
                "--concurrency" => options.concurrency = number(flag, value()?)?,
                "--kills" => options.kills = number(flag, value()?)?,
                "--restarts" => options.restarts = number(flag, value()?)?,
                "--deadline" => {
                    let seconds: u64 = number(flag, value()?)?;
                    if seconds > 7 * 24 * 3600 {
                        return Err(format!(
                            "`{flag}` is at most a week (604800 s), not {seconds} s"
                        ));
                    }
                    options.deadline = Duration::from_secs(seconds);
                }
                "--seed" => options.seed = Some(number(flag, value()?)?),
                "--pg-bin" => options.pg_bin = Some(PathBuf::from(value()?)),
                "--keep" => options.keep = true,
                other => return Err(format!("unknown option `{other}`; see --help")),
            }
        }
        if options.runs == 0 || options.workers == 0 || options.concurrency == 0 {
            return Err("`--runs`, `--workers` and `--concurrency` must be above 0".to_owned());
        }
        Ok(Some(options))
    }
}

/// What `failover --help` and `half-open --help` print.
pub(crate) const OUTAGE_USAGE: &str = "\
pgbus-chaos failover: stop the primary mid-run, promote its synchronous standby,
                      and check that workers and a client go on against it
pgbus-chaos half-open: make every connection of a worker half-open mid-run
                      (its packets dropped) and check that it notices within
                      the keepalive bound, reconnects, and finishes every run

usage: pgbus-chaos failover|half-open [options]

  --runs N          runs to start, each of 5 steps            (default 100)
  --workers N       workers (in this process)                 (default 2)
  --concurrency N   step bodies each worker runs at once      (default 8)
  --deadline SECS   give up, and fail, after this long        (default 60)
  --async           failover only: asynchronous replication, to see what
                    it loses (the checks may fail)
  --client-side-only  half-open only: no server-side keepalives or
                    idle_in_transaction_session_timeout on the workers'
                    sessions (shows what the server's defaults leave behind)
  --pg-bin DIR      PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup)
  --keep            keep the clusters' directories and logs afterwards

Both run private PostgreSQL clusters on free ports of 127.0.0.1; half-open runs
in a network namespace of its own (root, `ip` and `nft` needed). Exit codes as
for the chaos run.";

/// The options of the failover and half-open modes.
#[derive(Debug, Clone)]
#[allow(clippy::struct_excessive_bools, reason = "command-line flags")]
pub(crate) struct OutageOptions {
    pub(crate) runs: u32,
    pub(crate) workers: u32,
    pub(crate) concurrency: u32,
    pub(crate) deadline: Duration,
    pub(crate) asynchronous: bool,
    pub(crate) pg_bin: Option<PathBuf>,
    pub(crate) keep: bool,
    /// Set by `half-open` on the copy of itself it runs inside the network
    /// namespace.
    pub(crate) inside: bool,
    pub(crate) client_side_only: bool,
}

impl OutageOptions {
    /// The options, or `None` for `--help`.
    pub(crate) fn parse(args: &[String]) -> Result<Option<Self>, String> {
        let mut options = Self {
            runs: 100,
            workers: 2,
            concurrency: 8,
            deadline: Duration::from_mins(1),
            asynchronous: false,
            pg_bin: None,
            keep: false,
            inside: false,
            client_side_only: false,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| format!("`{flag}` needs a value; see --help"))
            };
            match flag.as_str() {
                "--help" | "-h" => return Ok(None),
                "--runs" => options.runs = number(flag, value()?)?,
                "--workers" => options.workers = number(flag, value()?)?,
                "--concurrency" => options.concurrency = number(flag, value()?)?,
                "--deadline" => {
                    let seconds: u64 = number(flag, value()?)?;
                    if seconds > 24 * 3600 {
                        return Err(format!(
                            "`{flag}` is at most a day (86400 s), not {seconds} s"
                        ));
                    }
                    options.deadline = Duration::from_secs(seconds);
                }
                "--async" => options.asynchronous = true,
                "--pg-bin" => options.pg_bin = Some(PathBuf::from(value()?)),
                "--keep" => options.keep = true,
                "--inside" => options.inside = true,
                "--client-side-only" => options.client_side_only = true,
                other => return Err(format!("unknown option `{other}`; see --help")),
            }
        }
        if options.runs < 2 || options.workers == 0 || options.concurrency == 0 {
            return Err(
                "`--runs` must be at least 2, `--workers` and `--concurrency` above 0".to_owned(),
            );
        }
        Ok(Some(options))
    }
}

/// The options of a worker process, which the supervisor passes.
#[derive(Debug, Clone)]
pub(crate) struct WorkerOptions {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) concurrency: u32,
    pub(crate) label: String,
}

impl WorkerOptions {
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut url = None;
        let mut schema = None;
        let mut concurrency = 8;
        let mut label = "worker".to_owned();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("worker: `{flag}` needs a value"))?;
            match flag.as_str() {
                "--url" => url = Some(value.clone()),
                "--schema" => schema = Some(value.clone()),
                "--concurrency" => concurrency = number(flag, value)?,
                "--label" => label.clone_from(value),
                other => return Err(format!("worker: unknown option `{other}`")),
            }
        }
        Ok(Self {
            url: url.ok_or("worker: `--url` is required")?,
            schema: schema.ok_or("worker: `--schema` is required")?,
            concurrency,
            label,
        })
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("`{flag}` takes a whole number, not `{value}`"))
}
