//! The pgbus benchmark (issue 7): in one run, on the local PostgreSQL,
//!
//! 1. steps per second of runs of five no-op steps through one worker in this
//!    process at concurrency 1, 4, 16 and 64, each beside the raw-SQL floor
//!    (`shared/bench/raw_sql_baseline.sh`, pgbench at as many clients);
//! 2. pickup latency with an idle worker, with `LISTEN/NOTIFY` and without;
//! 3. steps per second as history grows (1 and 5 million finished step rows)
//!    and with 10,000 runs parked waiting on a signal;
//! 4. this process's peak and current resident memory;
//! 5. the compile time of a 100-step `#[workflow]` against plain methods;
//! 6. starts per second: 10,000 runs one by one and with `start_many`;
//! 7. flow control: steps per second beside 10,000 concurrency keys at
//!    their limit, and what holding back the rows at the head of the queue
//!    costs the claim;
//! 8. (only with `--only-dashboard`, which takes minutes to load its data)
//!    how long each page of `pgbus dashboard` takes on a million runs.
//!
//! ```sh
//! cargo run --release -p pgbus-bench                    # the full run, under 5 minutes
//! cargo run --release -p pgbus-bench -- --quick         # a smoke run of everything
//! cargo run --release -p pgbus-bench -- --only-steps    # section 1 alone
//! cargo run --release -p pgbus-bench -- --only-starts   # section 6 alone
//! cargo run --release -p pgbus-bench -- --only-flow     # section 7 alone
//! cargo build --release -p pgbus-cli && \
//!     cargo run --release -p pgbus-bench -- --only-dashboard  # section 8
//! ```
//!
//! It prints a table and writes the same figures as JSON to
//! `target/bench/latest.json`. Every measurement runs in a fresh schema
//! (`bench_<uuid>`, database `test` unless `PGBUS_BENCH_DATABASE_URL` says
//! otherwise), dropped afterwards, also on error or Ctrl-C. It measures; it
//! changes nothing in the engine.

mod baseline;
mod cpu;
mod dashboard;
mod flow;
mod history;
mod latency;
mod machine;
mod macro_cost;
mod memory;
mod options;
mod report;
mod runner;
mod schema;
mod starts;
mod throughput;
mod wire;
mod workflows;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::options::Options;
use crate::report::{Report, ThroughputRow};

/// Errors of any phase: each says what failed.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The workspace's root directory (this crate's parent).
pub(crate) fn workspace_root() -> &'static Path {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    bench.parent().unwrap_or(bench)
}

/// The workspace's target directory: `CARGO_TARGET_DIR` when set, as cargo
/// reads it, else `target/` at the root.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match Options::parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("pgbus-bench: {error}");
            return ExitCode::from(2);
        }
    };
    // The engine's warnings (a stuck sweep, a lost connection) belong beside
    // the figures they may explain.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("pgbus-bench: no runtime: {error}");
            return ExitCode::from(2);
        }
    };

    let began = Instant::now();
    let mut report = Report::new(&args, options.scale(), options.only_starts);
    report.only_flow = options.only_flow;
    report.only_steps = options.only_steps;
    report.only_dashboard = options.only_dashboard;
    schema::GROUP_COMMIT.store(options.group_commit, std::sync::atomic::Ordering::Relaxed);
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = measure(&options, &mut report) => outcome,
            // Dropping `measure` drops the schema guards, which drop the schemas.
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    });
    report.wall_s = began.elapsed().as_secs_f64();
    report.settle();
    report.error = outcome.err().map(|error| error.to_string());
    // A cargo build still running after Ctrl-C gets the signal too; do not
    // wait long for it.
    runtime.shutdown_timeout(Duration::from_secs(1));

    print!("{report}");
    // A run that never reached the server leaves the last figures in place.
    if report.machine.is_some() {
        let file = if options.only_steps {
            "steps.json"
        } else if options.only_starts {
            "starts.json"
        } else if options.only_flow {
            "flow.json"
        } else if options.only_dashboard {
            "dashboard.json"
        } else {
            "latest.json"
        };
        let json = target_dir().join("bench").join(file);
        match write_json(&report, &json) {
            Ok(()) => println!("figures as JSON: {}", json.display()),
            Err(error) => eprintln!("pgbus-bench: could not write {}: {error}", json.display()),
        }
    }
    match &report.error {
        None => ExitCode::SUCCESS,
        Some(error) => {
            eprintln!("pgbus-bench: stopped early, the table has what was measured: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every phase, filling `report` as it goes, so an error still leaves
/// the figures measured before it. Phases run in the order that keeps the
/// memory readings attributable (the peak after each concurrency, up to 64,
/// then after the parked runs); the table prints them in the issue's order.
async fn measure(options: &Options, report: &mut Report) -> Result<(), BoxError> {
    let scale = options.scale();
    let url = options.url.as_str();
    let admin = schema::connect(url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e} (is PostgreSQL running?)"))?;
    report.machine = Some(machine::Machine::read(&admin).await?);
    drop(admin);
    if options.only_starts {
        eprintln!("pgbus-bench: starts per second");
        report.starts = Some(starts::measure(url, scale.start_runs).await?);
        return Ok(());
    }
    if options.only_flow {
        eprintln!("pgbus-bench: flow control");
        report.flow = Some(flow::measure(url, scale.waiting_runs, scale.measure_secs).await?);
        return Ok(());
    }
    if options.only_dashboard {
        eprintln!("pgbus-bench: dashboard pages");
        report.dashboard =
            Some(dashboard::measure(url, scale.dashboard_runs, scale.dashboard_rounds).await?);
        return Ok(());
    }
    report
        .memory
        .push(memory::Memory::read("start, nothing run yet"));

    for concurrency in scale.concurrencies {
        eprintln!("pgbus-bench: steps per second at concurrency {concurrency}");
        let engine = {
            // The schema (and the engine's pool) goes before the baseline
            // runs, so the two never share the server.
            let bench = schema::BenchSchema::create(url).await?;
            throughput::measure(&bench, concurrency, scale.measure_secs, false).await?
        };
        eprintln!(
            "pgbus-bench:   engine {:.0} steps/s; raw SQL baseline",
            engine.steps_per_s
        );
        // The baseline starts where the engine's batch did: after a checkpoint.
        schema::checkpoint(&schema::connect(url).await?).await;
        let baseline = baseline::measure(concurrency, scale.baseline_secs, url).await;
        report.throughput.push(ThroughputRow::new(engine, baseline));
        report.memory.push(memory::Memory::read(&format!(
            "steps per second at concurrency {concurrency}"
        )));
    }
    if options.only_steps {
        return Ok(());
    }

    eprintln!(
        "pgbus-bench: steps per second beside {} parked runs",
        scale.waiting_runs
    );
    report.parked = Some(history::parked(url, scale.waiting_runs, scale.measure_secs).await?);
    report.memory.push(memory::Memory::read(&format!(
        "{} runs parked, steps per second beside them",
        history::human(u64::from(scale.waiting_runs))
    )));

    for notifications in [true, false] {
        eprintln!("pgbus-bench: pickup latency, notifications {notifications}");
        let latency = latency::measure(url, notifications, scale.latency_samples).await?;
        report.latency.push(latency);
    }

    eprintln!("pgbus-bench: steps per second as history grows");
    report.history = history::grow(url, scale.history_rows, scale.measure_secs).await?;

    eprintln!("pgbus-bench: starts per second");
    report.starts = Some(starts::measure(url, scale.start_runs).await?);

    eprintln!("pgbus-bench: flow control");
    report.flow = Some(flow::measure(url, scale.waiting_runs, scale.measure_secs).await?);

    if options.macro_cost {
        eprintln!("pgbus-bench: macro cost (cargo builds)");
        let target = target_dir();
        report.macro_cost =
            Some(tokio::task::spawn_blocking(move || macro_cost::measure(&target)).await??);
    }
    Ok(())
}

fn write_json(report: &Report, path: &Path) -> Result<(), BoxError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(report)? + "\n")?;
    Ok(())
}
