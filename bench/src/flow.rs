//! Flow control (issue 21): steps per second at concurrency 16 beside
//! 10,000 concurrency keys at their limit, against the empty schema, and
//! what holding back rows at the head of the queue costs the claim.
//!
//! Setup: 10,000 runs of [`KeyHolder`] (`key_concurrency = 1`, `slot =
//! "run"`), one key each, claimed and parked: each holds its key's slot for
//! good. Then a second run of each key: its first row is due, ahead of
//! everything else (priority -1), and at its key's limit. A worker that has
//! the workflow claims them: each claim holds back what it meets (`held_by`,
//! out of the due index), and the time until all 10,000 are held is the
//! claim's cost when every due row at the head of the queue is held by a
//! limit. Then [`FiveSteps`](crate::workflows::FiveSteps) is measured
//! beside them as in section 1.

use std::time::{Duration, Instant};

use pgbus_runtime::StartOptions;

use crate::BoxError;
use crate::runner::{RunningWorker, await_count};
use crate::schema::BenchSchema;
use crate::throughput::{self, Throughput};
use crate::workflows::{KeyHolder, NEVER_KEYED};

/// The concurrency the figures are measured at.
pub(crate) const CONCURRENCY: usize = 16;

/// Rows of [`KeyHolder`] parked on `never_keyed`: the slot holders.
const PARKED: &str = "
SELECT count(*) FROM {schema}.steps WHERE status = 'waiting' AND waiting_for = $1";

/// Rows held back by a concurrency key.
const HELD: &str = "
SELECT count(*) FROM {schema}.steps WHERE held_by IS NOT NULL AND status = 'scheduled'";

/// The figures of this section.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct FlowFigures {
    /// Keys at their limit (each with one more run held back).
    pub(crate) keys: u32,
    /// Steps per second in an empty schema.
    pub(crate) empty: Throughput,
    /// Steps per second beside the keys at their limit and their held rows.
    pub(crate) beside: Throughput,
    /// `beside` over `empty`, in percent.
    pub(crate) pct_of_empty: f64,
    /// Seconds from the second runs' start until every one was held back.
    pub(crate) hold_s: f64,
    /// Rows held back per second by a worker of concurrency 16 claiming
    /// them: the claim's cost when every due row at the head of the queue
    /// is at its limit.
    pub(crate) held_per_s: f64,
}

async fn start_keyed(bench: &BenchSchema, keys: u32) -> Result<(), BoxError> {
    let client = bench.db().client();
    let all: Vec<u32> = (0..keys).collect();
    for chunk in all.chunks(pgbus_runtime::MAX_STARTS_PER_CALL) {
        // The key the workflow's method derives, given outright.
        client
            .start_many::<KeyHolder>(chunk.iter().map(|&i| {
                (
                    i,
                    StartOptions::new().concurrency_key(format!("customer-{i}")),
                )
            }))
            .await?;
    }
    Ok(())
}

/// Measures the section with `keys` keys for `secs` seconds a figure.
pub(crate) async fn measure(url: &str, keys: u32, secs: f64) -> Result<FlowFigures, BoxError> {
    let empty = {
        let bench = BenchSchema::create(url).await?;
        throughput::measure(&bench, CONCURRENCY, secs, false).await?
    };
    let bench = BenchSchema::create(url).await?;
    let admin = bench.admin().await?;
    let worker = RunningWorker::spawn(
        bench
            .db()
            .worker()
            .register(KeyHolder)
            .concurrency(CONCURRENCY)
            .build()?,
    );
    start_keyed(&bench, keys).await?;
    let every = Duration::from_millis(50);
    await_count(
        &admin,
        &bench.sql(PARKED),
        &[&NEVER_KEYED],
        i64::from(keys),
        every,
    )
    .await?;
    eprintln!("pgbus-bench:   {keys} keys at their limit; holding back a second run of each");
    let began = Instant::now();
    start_keyed(&bench, keys).await?;
    await_count(&admin, &bench.sql(HELD), &[], i64::from(keys), every).await?;
    let hold_s = began.elapsed().as_secs_f64();
    worker.stop().await?;
    eprintln!("pgbus-bench:   {keys} rows held back in {hold_s:.1} s; measuring beside them");
    let beside = throughput::measure(&bench, CONCURRENCY, secs, false).await?;
    let pct_of_empty = 100.0 * beside.steps_per_s / empty.steps_per_s.max(f64::MIN_POSITIVE);
    Ok(FlowFigures {
        keys,
        empty,
        beside,
        pct_of_empty,
        hold_s,
        held_per_s: f64::from(keys) / hold_s.max(f64::MIN_POSITIVE),
    })
}
