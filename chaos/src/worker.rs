//! Worker mode: one pgbus worker in its own process, started by the supervisor.
//! It prints `ready <worker id>` once built, logs to stderr (`warn` and up, or
//! `RUST_LOG`), and stops gracefully when its stdin closes; the supervisor kills
//! it with SIGKILL instead when the schedule says so.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use pgbus_runtime::{Clock, Database, FailureAction, Schema, StallAction, Worker};

use crate::options::WorkerOptions;
use crate::workflow::Pipeline;

/// How the workers are tuned: a lost worker is noticed within seconds.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);
/// See [`HEARTBEAT`].
pub(crate) const LOST_WORKER: Duration = Duration::from_secs(3);
/// See [`HEARTBEAT`].
pub(crate) const SWEEP: Duration = Duration::from_secs(1);
/// Bodies take milliseconds; an attempt in progress this long was orphaned
/// under a live worker, and the `timeout` detection picks it up.
pub(crate) const STALL_THRESHOLD: Duration = Duration::from_secs(30);

/// A worker of the chaos workflow, tuned as above, its bodies recording their
/// side effects under `label`.
pub(crate) fn build(db: &Database, label: &str, concurrency: u32) -> Result<Worker, String> {
    db.worker()
        .register(Pipeline {
            db: db.clone(),
            label: label.to_owned(),
        })
        .concurrency(usize::try_from(concurrency).unwrap_or(8))
        .poll_interval(Duration::from_millis(200))
        // As many reattempts in a row as the workflow's policy grants: the
        // count is shared, so a worker killed after a streak of failures in a
        // restart would otherwise pause its run.
        .stall_action(StallAction::Reattempt {
            wait: Duration::ZERO,
            max_reattempts: 30,
            terminal_action: FailureAction::Pause,
        })
        .heartbeat_interval(HEARTBEAT)
        .lost_worker_threshold(LOST_WORKER)
        .sweep_interval(SWEEP)
        .stall_threshold(STALL_THRESHOLD)
        .shutdown_grace(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

pub(crate) fn main(options: WorkerOptions) -> Result<bool, String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("worker: no runtime: {e}"))?
        .block_on(run(options))
        .map(|()| true)
}

async fn run(options: WorkerOptions) -> Result<(), String> {
    let schema = Schema::new(&options.schema).map_err(|e| e.to_string())?;
    // The server may be restarting just now: try for a while.
    let began = Instant::now();
    let db = loop {
        match Database::connect_with(&options.url, schema.clone(), Clock::Database).await {
            Ok(db) => break db,
            Err(_) if began.elapsed() < Duration::from_mins(1) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => return Err(format!("worker {}: cannot connect: {error}", options.label)),
        }
    };
    let worker = build(&db, &options.label, options.concurrency)?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "ready {}", worker.id()).map_err(|e| e.to_string())?;
        stdout.flush().map_err(|e| e.to_string())?;
    }
    let stdin_closed = async {
        // Reads until the supervisor closes the pipe (or dies).
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().lock().read_to_end(&mut sink);
        })
        .await;
    };
    worker
        .run_until(stdin_closed)
        .await
        .map_err(|e| e.to_string())
}
