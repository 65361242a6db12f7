//! What the failover and half-open modes share: logging into a [`Captured`],
//! in-process workers of the chaos workflow, a client that starts runs at a
//! steady pace while the outage happens (retrying a start that failed with a
//! connection error under the same idempotency key, as an application
//! should), the wait for every run to end, and the checks and figures that
//! follow.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pgbus_runtime::{Clock, Database, Schema};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::capture::{CaptureLayer, Captured};
use crate::check;
use crate::options::OutageOptions;
use crate::workflow::{Order, Pipeline, SCHEMA};

/// How long the client waits between two starts: 100 runs take two seconds
/// to start, so the outage lands while runs are still being started.
pub(crate) const START_EVERY: Duration = Duration::from_millis(20);

/// How long the client waits before it tries a failed start again.
const START_RETRY: Duration = Duration::from_millis(50);

/// Logs `warn` and up (or `RUST_LOG`) to stderr, and captures `info` and up
/// and the worker's `debug` step ends.
pub(crate) fn logging() -> Captured {
    let captured = Captured::default();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter),
        )
        .with(
            CaptureLayer(captured.clone()).with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_default(tracing::Level::INFO)
                    .with_target(crate::capture::STEP_TARGET, tracing::Level::DEBUG),
            ),
        )
        .try_init();
    captured
}

/// Connects to `url` on the chaos schema, trying for `patience` (the server may
/// be coming up or going away).
pub(crate) async fn connect(url: &str, patience: Duration) -> Result<Database, String> {
    let schema = Schema::new(SCHEMA).map_err(|e| e.to_string())?;
    let began = Instant::now();
    loop {
        match Database::connect_with(url, schema.clone(), Clock::Database).await {
            Ok(db) => return Ok(db),
            Err(error) if began.elapsed() >= patience => {
                return Err(format!("cannot connect to {url}: {error}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What the client saw.
#[derive(Debug, Default)]
pub(crate) struct Starts {
    /// The runs it started (each id once).
    pub(crate) ids: BTreeSet<i64>,
    /// When each start returned, in order.
    pub(crate) at: Vec<Instant>,
    /// Starts that failed with a connection error and were tried again.
    pub(crate) retries: usize,
    /// Retries that found the run already there: the first try had committed
    /// but its reply was lost.
    pub(crate) found_on_retry: usize,
}

/// Workers and a client running the chaos workflow.
pub(crate) struct Load {
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<Result<(), String>>>,
    client: JoinHandle<Result<(), String>>,
    /// Runs the client has started so far.
    pub(crate) started: Arc<AtomicUsize>,
    starts: Arc<Mutex<Starts>>,
}

impl Load {
    /// Starts `options.workers` workers on `url` (each on a `Database` of its
    /// own, as separate processes would be) and the client on `client_url`.
    pub(crate) async fn start(
        url: &str,
        client_url: &str,
        options: &OutageOptions,
    ) -> Result<Self, String> {
        let (stop, stopped) = watch::channel(false);
        let mut workers = Vec::new();
        for i in 0..options.workers {
            let db = connect(url, Duration::from_secs(10)).await?;
            let worker = crate::worker::build(&db, &format!("w{i}"), options.concurrency)?;
            let mut stopped = stopped.clone();
            workers.push(tokio::spawn(async move {
                worker
                    .run_until(async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    })
                    .await
                    .map_err(|e| e.to_string())
            }));
        }
        let db = connect(client_url, Duration::from_secs(10)).await?;
        let started = Arc::new(AtomicUsize::new(0));
        let starts = Arc::new(Mutex::new(Starts::default()));
        let client = tokio::spawn(start_runs(
            db,
            options.runs,
            Arc::clone(&started),
            Arc::clone(&starts),
        ));
        Ok(Self {
            stop,
            workers,
            client,
            started,
            starts,
        })
    }

    /// Waits until the client has started `n` runs, or `deadline`.
    pub(crate) async fn wait_started(&self, n: usize, deadline: Instant) -> Result<(), String> {
        while self.started.load(Ordering::Acquire) < n {
            if Instant::now() >= deadline {
                return Err(format!("the client did not start {n} runs in time"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Waits until the client has started half of `runs` (at least one), or
    /// `deadline`: the moment for the outage. How many that is.
    pub(crate) async fn wait_half_started(
        &self,
        runs: u32,
        deadline: Instant,
    ) -> Result<usize, String> {
        let half = usize::try_from(runs / 2).unwrap_or(1);
        self.wait_started(half, deadline).await?;
        Ok(half)
    }

    /// Waits until every run was started and has ended (finished, paused or
    /// cancelled), polling through `db`, or until `deadline`. Whether they all
    /// ended in time.
    pub(crate) async fn wait_ended(&self, db: &Database, runs: u32, deadline: Instant) -> bool {
        let runs = i64::from(runs);
        loop {
            if self.client.is_finished() {
                let ended = async {
                    db.pool()
                        .get()
                        .await
                        .ok()?
                        .query_one(
                            "SELECT count(*) FROM chaos.runs
                             WHERE status IN ('finished', 'paused', 'cancelled')",
                            &[],
                        )
                        .await
                        .ok()
                        .map(|row| row.get::<_, i64>(0))
                };
                if ended.await == Some(runs) {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// [`Load::stop`], bounded at 15 s: a worker whose commits hang (a
    /// promoted server still waiting for a synchronous standby, a connection
    /// gone dark) must fail the run, not hang it.
    pub(crate) async fn stop_within_bound(self) -> Result<Starts, String> {
        tokio::time::timeout(Duration::from_secs(15), self.stop())
            .await
            .map_err(|_| "the workers did not stop within 15 s".to_owned())?
    }

    /// Stops the workers (gracefully) and the client; what the client saw.
    pub(crate) async fn stop(self) -> Result<Starts, String> {
        let _ = self.stop.send(true);
        self.client.abort();
        let client = self.client.await;
        for worker in self.workers {
            worker
                .await
                .map_err(|e| format!("a worker panicked: {e}"))??;
        }
        if let Ok(Err(error)) = client {
            return Err(error);
        }
        let starts =
            std::mem::take(&mut *self.starts.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(starts)
    }
}

/// Starts runs 0..`runs`, one every [`START_EVERY`], each with the idempotency
/// key `run-<n>`; a start that fails with a connection error is tried again
/// under the same key until it succeeds.
async fn start_runs(
    db: Database,
    runs: u32,
    started: Arc<AtomicUsize>,
    starts: Arc<Mutex<Starts>>,
) -> Result<(), String> {
    let client = db.client();
    for n in 0..runs {
        let key = format!("run-{n}");
        let mut tries = 0_usize;
        let run = loop {
            match client
                .start_idempotent::<Pipeline>(&Order { n }, &key)
                .await
            {
                Ok(run) => break run,
                Err(error) if error.is_transient() && tries < 600 => {
                    tries += 1;
                    tokio::time::sleep(START_RETRY).await;
                }
                Err(error) => return Err(format!("could not start run {n}: {error}")),
            }
        };
        {
            let mut starts = starts.lock().unwrap_or_else(PoisonError::into_inner);
            starts.ids.insert(run.run_id.0);
            starts.at.push(Instant::now());
            starts.retries += tries;
            if tries > 0 && !run.created {
                starts.found_on_retry += 1;
            }
        }
        started.fetch_add(1, Ordering::AcqRel);
        tokio::time::sleep(START_EVERY).await;
    }
    Ok(())
}

/// Runs `mode` (a failover or half-open run, which says whether it passed)
/// to its end on a two-thread runtime.
pub(crate) fn block_on(mode: impl Future<Output = Result<bool, String>>) -> Result<bool, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?
        .block_on(mode)
}

/// Checks the runs through `db` with the mode's own `figures` added (see
/// [`check::outage`]) and prints the report; whether its checks passed.
pub(crate) async fn report(
    db: &Database,
    runs: u32,
    starts: &Starts,
    captured: &Captured,
    figures: Vec<(&'static str, String)>,
) -> Result<bool, String> {
    let report = check::outage(db, runs, &starts.ids, captured.completed_steps(), figures).await?;
    report.print();
    Ok(report.passed())
}

/// The figures on either side of the outage, `event` (`stop`, `drop`) at
/// `at`: the steps completed before and after it, and what the workers
/// logged since.
pub(crate) fn across_figures(
    captured: &Captured,
    event: &str,
    at: Instant,
    steps_before: usize,
) -> [(&'static str, String); 2] {
    [
        (
            "steps across it",
            format!(
                "{steps_before} completed before the {event}, {} after",
                captured.completed_steps() - steps_before
            ),
        ),
        (
            "worker log",
            format!(
                "warnings and errors after the {event}:{}",
                warnings_figure(captured, at)
            ),
        ),
    ]
}

/// The warnings and errors logged since `since`, one line per message with
/// its count, for a figure.
pub(crate) fn warnings_figure(captured: &Captured, since: Instant) -> String {
    let mut lines = String::new();
    for (message, count) in captured.warnings_since(since) {
        let _ = write!(lines, "\n  {:<20} {count:>6}  {message}", "");
    }
    lines
}

/// `d` in seconds with two decimals.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
