//! Dashboard pages (issue 23; `-- --only-dashboard` runs this section): how
//! long each page of `pgbus dashboard` takes to answer on a schema of a
//! million runs and five million step rows.
//!
//! The data comes from `bench/sql/dashboard_data.sql` ([`data`]), loaded into
//! a fresh bench schema. The dashboard is the built `pgbus` binary
//! (`cargo build --release -p pgbus-cli` first), started on a free loopback
//! port against that schema without a token, as an operator would run it.
//! Each page of [`pages::PAGES`] is requested once to warm up (prepared
//! statements, the server's caches), then once per round, all pages in turn
//! each round, each request on a fresh connection and timed from connecting
//! to the last byte of the answer. The live workers' heartbeats are renewed
//! before each round, so the workers page and the runs' "can a live worker
//! run this" marks see live workers.

pub(crate) mod data;
mod pages;
#[cfg(test)]
mod tests;

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::BoxError;
use crate::latency::nearest_rank;
use crate::schema::BenchSchema;
use data::Shape;
use pages::{PAGES, Page};

/// What every page should answer within, milliseconds (issue 23).
pub(crate) const BUDGET_MS: f64 = 200.0;

/// How long a request may take before it counts as failed: past the
/// dashboard's own 15-second page timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the dashboard may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The section's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct DashboardFigures {
    /// The data the pages read.
    pub(crate) shape: Shape,
    /// The binary that served them.
    pub(crate) binary: String,
    /// Timed requests per page (after one untimed).
    pub(crate) rounds: usize,
    pub(crate) pages: Vec<PageFigure>,
}

/// One page's answers.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct PageFigure {
    pub(crate) name: &'static str,
    /// The path requested, once its id is picked.
    pub(crate) path: Option<String>,
    /// `ok` (every answer 200), `absent` (404: no such page yet), `no run`
    /// (the data has no run of the page's kind), or `status N` for any
    /// other answer.
    pub(crate) outcome: String,
    pub(crate) samples: usize,
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) max_ms: f64,
    /// The answer's size, bytes (the last one).
    pub(crate) bytes: usize,
    /// Whether every timed answer came within [`BUDGET_MS`]; none when the
    /// page was not measured.
    pub(crate) under_budget: Option<bool>,
}

impl PageFigure {
    fn unmeasured(page: &Page, path: Option<String>, outcome: &str) -> Self {
        Self {
            name: page.name,
            path,
            outcome: outcome.to_owned(),
            samples: 0,
            p50_ms: 0.0,
            p95_ms: 0.0,
            max_ms: 0.0,
            bytes: 0,
            under_budget: None,
        }
    }
}

/// Loads `runs` runs into a fresh schema on `url`, serves it with the built
/// dashboard, and times each page `rounds` times.
pub(crate) async fn measure(
    url: &str,
    runs: u64,
    rounds: usize,
) -> Result<DashboardFigures, BoxError> {
    // Before the load, which takes minutes: no binary, no point.
    let binary = binary()?;
    let bench = BenchSchema::create(url).await?;
    eprintln!(
        "pgbus-bench:   dashboard data: {runs} runs into {}",
        bench.name()
    );
    let shape = data::generate(&bench, runs).await?;
    let admin = bench.admin().await?;

    let mut paths = Vec::new();
    for page in PAGES {
        paths.push(resolve(&bench, &admin, page).await?);
    }
    let server = Dashboard::start(&binary, bench.url(), bench.name()).await?;
    eprintln!(
        "pgbus-bench:   dashboard on http://{}/, {} pages, {rounds} rounds",
        server.addr,
        PAGES.len()
    );

    // Per page: the timed answers, the statuses seen, the last size.
    let mut taken: Vec<Vec<f64>> = vec![Vec::new(); PAGES.len()];
    let mut statuses: Vec<Vec<u16>> = vec![Vec::new(); PAGES.len()];
    let mut sizes = vec![0_usize; PAGES.len()];
    for round in 0..=rounds {
        renew_heartbeats(&bench, &admin).await?;
        for (i, path) in paths.iter().enumerate() {
            let Some(path) = path else { continue };
            // A page that is not there is asked once.
            if statuses[i].first() == Some(&404) {
                continue;
            }
            let answer = get(server.addr, path)
                .await
                .map_err(|e| format!("GET {path}: {e}{}", server.last_words()))?;
            statuses[i].push(answer.status);
            sizes[i] = answer.bytes;
            // Round 0 warms up.
            if round > 0 {
                taken[i].push(answer.took.as_secs_f64() * 1000.0);
            }
        }
    }
    drop(server);

    let mut figures = Vec::new();
    for (i, page) in PAGES.iter().enumerate() {
        let path = paths[i].clone();
        if path.is_none() {
            figures.push(PageFigure::unmeasured(page, None, "no run"));
            continue;
        }
        if statuses[i].first() == Some(&404) {
            figures.push(PageFigure::unmeasured(page, path, "absent"));
            continue;
        }
        let outcome = match statuses[i].iter().find(|&&s| s != 200) {
            None => "ok".to_owned(),
            Some(status) => format!("status {status}"),
        };
        let mut sorted = taken[i].clone();
        sorted.sort_by(f64::total_cmp);
        let max_ms = sorted.last().copied().unwrap_or(0.0);
        figures.push(PageFigure {
            name: page.name,
            path,
            under_budget: (outcome == "ok").then_some(max_ms < BUDGET_MS),
            outcome,
            samples: sorted.len(),
            p50_ms: nearest_rank(&sorted, 50),
            p95_ms: nearest_rank(&sorted, 95),
            max_ms,
            bytes: sizes[i],
        });
    }
    Ok(DashboardFigures {
        shape,
        binary: binary.display().to_string(),
        rounds,
        pages: figures,
    })
}

/// The page's path with its run picked, or `None` when the data has no run
/// of its kind.
async fn resolve(
    bench: &BenchSchema,
    admin: &tokio_postgres::Client,
    page: &Page,
) -> Result<Option<String>, BoxError> {
    let Some(pick) = page.pick else {
        return Ok(Some(page.path.to_owned()));
    };
    let id: Option<i64> = admin
        .query_opt(&bench.sql(pick), &[])
        .await
        .map_err(|e| format!("picking the run of `{}`: {e}", page.name))?
        .and_then(|row| row.get(0));
    Ok(id.map(|id| page.path.replace("{id}", &id.to_string())))
}

/// Makes the loaded workers live for the next round.
async fn renew_heartbeats(
    bench: &BenchSchema,
    admin: &tokio_postgres::Client,
) -> Result<(), BoxError> {
    admin
        .execute(
            &bench.sql("UPDATE {schema}.workers SET heartbeat_at = clock_timestamp()"),
            &[],
        )
        .await?;
    Ok(())
}

/// The release `pgbus` binary of this workspace, or what to build. A
/// binary older than the sources it is built from is measured all the same,
/// with a warning.
fn binary() -> Result<PathBuf, BoxError> {
    let path = crate::target_dir().join("release").join("pgbus");
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_err(|_| {
            format!(
                "no dashboard binary at {}: build it first with `cargo build --release -p pgbus-cli`",
                path.display()
            )
        })?;
    let root = crate::workspace_root();
    let sources = [
        "pgbus-cli/src",
        "pgbus-runtime/src",
        "pgbus-runtime/migrations",
        "pgbus-core/src",
    ];
    if let Some(newer) = sources
        .iter()
        .find_map(|dir| newer_than(&root.join(dir), built))
    {
        eprintln!(
            "pgbus-bench: WARNING: {} is older than {} (rebuild with `cargo build --release -p pgbus-cli`)",
            path.display(),
            newer.display()
        );
    }
    Ok(path)
}

/// A file under `dir` changed after `time`, if any.
fn newer_than(dir: &Path, time: SystemTime) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            if let Some(newer) = newer_than(&path, time) {
                return Some(newer);
            }
        } else if meta.modified().is_ok_and(|m| m > time) {
            return Some(path);
        }
    }
    None
}

/// The dashboard process, killed when dropped.
struct Dashboard {
    child: Child,
    addr: SocketAddr,
    /// The last lines it wrote to standard error.
    said: Arc<Mutex<Vec<String>>>,
}

impl Dashboard {
    /// Starts `binary`'s dashboard on a free loopback port against `schema`
    /// on `url`, and waits for it to say where it listens.
    async fn start(binary: &Path, url: &str, schema: &str) -> Result<Self, BoxError> {
        let mut child = Command::new(binary)
            .args(["--database-url", url, "--schema", schema])
            .args(["dashboard", "--bind", "127.0.0.1:0", "--no-token"])
            // A token or origin in the environment would conflict with
            // `--no-token`.
            .env_remove("PGBUS_DASHBOARD_TOKEN")
            .env_remove("PGBUS_PUBLIC_ORIGIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the dashboard's standard error was not piped".into());
        };
        let said = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let lines = Arc::clone(&said);
        // Reads every line, so the pipe never fills; the first that names
        // the address is sent on.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line
                    .strip_prefix("pgbus dashboard on http://")
                    .and_then(|rest| rest.trim_end_matches('/').parse::<SocketAddr>().ok())
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr);
                }
                let mut said = lines.lock().unwrap_or_else(PoisonError::into_inner);
                said.push(line);
                let excess = said.len().saturating_sub(20);
                said.drain(..excess);
            }
        });
        let mut dashboard = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            said,
        };
        match tokio::time::timeout(START_TIMEOUT, rx).await {
            Ok(Ok(addr)) => {
                dashboard.addr = addr;
                Ok(dashboard)
            }
            _ => Err(format!("the dashboard did not start{}", dashboard.last_words()).into()),
        }
    }

    /// What it last said, for an error message.
    fn last_words(&self) -> String {
        let said = self.said.lock().unwrap_or_else(PoisonError::into_inner);
        if said.is_empty() {
            String::new()
        } else {
            format!(" (the dashboard said: {})", said.join(" | "))
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer.
struct Answer {
    status: u16,
    bytes: usize,
    took: Duration,
}

/// `GET path` on a connection of its own (HTTP/1.1, `Connection: close`):
/// the status, the answer's size, and the time from connecting to its last
/// byte.
async fn get(addr: SocketAddr, path: &str) -> Result<Answer, BoxError> {
    let began = Instant::now();
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))??;
    let took = began.elapsed();
    // `HTTP/1.1 200 OK`
    let status = answer
        .split(|&b| b == b' ')
        .nth(1)
        .and_then(|code| std::str::from_utf8(code).ok())
        .and_then(|code| code.parse().ok())
        .ok_or("an answer without a status line")?;
    Ok(Answer {
        status,
        bytes: answer.len(),
        took,
    })
}
