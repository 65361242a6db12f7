//! pgbus's metrics in Prometheus: installs the `metrics-exporter-prometheus`
//! recorder with its HTTP listener, runs a batch of small workflows through a
//! worker that also keeps the `pgbus_runs` gauge, sweeps once, then fetches
//! `/metrics` from the listener as Prometheus would and prints what pgbus
//! reported.
//!
//! `DATABASE_URL` picks the database (default: the local server, database
//! `postgres`); the runs go to schema `pgbus_metrics_example`, dropped and
//! made anew each time.
//! `PGBUS_METRICS_ADDR` picks the listener (default `127.0.0.1:9464`); keep the
//! program running with `--serve` to scrape it yourself.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, DEFAULT_DATABASE_URL, Database, RunStatus, Schema};

const RUNS: usize = 20;

/// Three steps; every fifth run pauses itself at the second.
struct Invoice;

#[workflow(name = "metrics.invoice", input = u32)]
impl Invoice {
    #[step]
    async fn draft(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn approve(&self, cx: &mut StepCx<u32>) -> StepResult {
        if cx.input().is_multiple_of(5) {
            return Ok(Flow::pause("needs a second look"));
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn send(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::main]
async fn main() -> ExitCode {
    // Boxed: the whole example (a worker, a client, a metrics exporter) is one
    // future of some 16 KB, more than a stack frame should hold.
    match Box::pin(run()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let addr: SocketAddr = std::env::var("PGBUS_METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9464".to_owned())
        .parse()
        .map_err(|e| format!("PGBUS_METRICS_ADDR: {e}"))?;
    // Buckets make the two latency metrics Prometheus histograms (which add
    // up across workers) rather than summaries.
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(&[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0])
        .map_err(|e| format!("bad buckets: {e}"))?
        .install()
        .map_err(|e| format!("could not start the Prometheus listener on {addr}: {e}"))?;

    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
    let schema = Schema::new("pgbus_metrics_example").map_err(|e| e.to_string())?;
    let db = Database::connect_with(&url, schema, Clock::Database)
        .await
        .map_err(|e| format!("no PostgreSQL answered at {url}: {e}"))?;
    // The example's own schema, from empty each time, so the gauge shows this
    // run's runs only.
    db.pool()
        .get()
        .await
        .map_err(|e| e.to_string())?
        .batch_execute("DROP SCHEMA IF EXISTS pgbus_metrics_example CASCADE")
        .await
        .map_err(|e| e.to_string())?;
    db.migrate()
        .await
        .map_err(|e| format!("migration failed: {e}"))?;

    let client = db.client();
    let mut runs = Vec::new();
    for n in 1..=u32::try_from(RUNS).unwrap_or(u32::MAX) {
        runs.push(
            client
                .start::<Invoice>(&n)
                .await
                .map_err(|e| e.to_string())?
                .run_id,
        );
    }
    let worker = db
        .worker()
        .register(Invoice)
        .concurrency(4)
        .run_gauges(true)
        .build()
        .map_err(|e| e.to_string())?;
    let all_done = {
        let client = client.clone();
        let runs = runs.clone();
        async move {
            loop {
                let mut open = 0;
                for run in &runs {
                    let status = client.run(*run).await.map(|v| v.run.status);
                    if !matches!(status, Ok(RunStatus::Finished | RunStatus::Paused)) {
                        open += 1;
                    }
                }
                if open == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // Boxed: the loop and the watcher together are a large future.
    Box::pin(worker.run_until(all_done))
        .await
        .map_err(|e| format!("worker failed: {e}"))?;
    worker
        .sweep()
        .await
        .map_err(|e| format!("sweep failed: {e}"))?;

    let body = tokio::task::spawn_blocking(move || scrape(addr))
        .await
        .map_err(|e| e.to_string())??;
    println!("GET http://{addr}/metrics (pgbus's lines):");
    for line in body
        .lines()
        .filter(|l| l.contains("pgbus_") && !l.starts_with('#'))
    {
        println!("  {line}");
    }
    if std::env::args().any(|a| a == "--serve") {
        println!("serving http://{addr}/metrics until Ctrl-C");
        let _ = tokio::signal::ctrl_c().await;
    }
    Ok(())
}

/// `GET /metrics` over a plain socket: what a Prometheus server does.
fn scrape(addr: SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("could not reach the listener at {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err(format!(
            "the listener answered: {}",
            response.lines().next().unwrap_or("")
        )),
    }
}
