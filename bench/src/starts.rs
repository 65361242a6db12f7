//! Starts per second (issue 20): the same number of runs started one by one
//! (`Client::start`, one round trip each, awaited in turn) and in bulk
//! (`Client::start_many`, calls of `MAX_STARTS_PER_CALL`), with and without
//! idempotency keys. Each figure in a fresh schema; no worker runs.

use std::time::Instant;

use pgbus_runtime::{MAX_STARTS_PER_CALL, StartOptions};

use crate::BoxError;
use crate::schema::BenchSchema;
use crate::workflows::Started;

/// One figure: how long starting `runs` runs took, one way.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct StartRate {
    /// `one by one` or `start_many`.
    pub(crate) how: &'static str,
    /// Whether each run had an idempotency key.
    pub(crate) keyed: bool,
    pub(crate) runs: usize,
    /// Runs per `start_many` call (1 one by one).
    pub(crate) per_call: usize,
    pub(crate) secs: f64,
    pub(crate) starts_per_s: f64,
}

/// The four figures, and bulk over one by one.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Starts {
    pub(crate) rates: Vec<StartRate>,
    /// Bulk starts per second over one-by-one, without keys and with.
    pub(crate) speedup: Vec<(bool, f64)>,
}

fn options(keyed: bool, i: u64) -> StartOptions {
    if keyed {
        StartOptions::new().key(format!("start-{i}"))
    } else {
        StartOptions::new()
    }
}

async fn one_by_one(url: &str, runs: usize, keyed: bool) -> Result<StartRate, BoxError> {
    let bench = BenchSchema::create(url).await?;
    let client = bench.db().client();
    // A start to open the connection and prepare the statement.
    client
        .start_with::<Started>(&u64::MAX, &options(keyed, u64::MAX))
        .await?;
    let began = Instant::now();
    for i in 0..runs as u64 {
        client.start_with::<Started>(&i, &options(keyed, i)).await?;
    }
    Ok(rate(
        "one by one",
        keyed,
        runs,
        1,
        began.elapsed().as_secs_f64(),
    ))
}

async fn bulk(url: &str, runs: usize, keyed: bool) -> Result<StartRate, BoxError> {
    let bench = BenchSchema::create(url).await?;
    let client = bench.db().client();
    client
        .start_many::<Started>([(u64::MAX, options(keyed, u64::MAX))])
        .await?;
    let began = Instant::now();
    let mut started = 0;
    for call in (0..runs as u64)
        .collect::<Vec<_>>()
        .chunks(MAX_STARTS_PER_CALL)
    {
        let out = client
            .start_many::<Started>(call.iter().map(|&i| (i, options(keyed, i))))
            .await?;
        started += out.len();
    }
    let secs = began.elapsed().as_secs_f64();
    if started != runs {
        return Err(format!("start_many started {started} of {runs} runs").into());
    }
    Ok(rate(
        "start_many",
        keyed,
        runs,
        MAX_STARTS_PER_CALL.min(runs),
        secs,
    ))
}

fn rate(how: &'static str, keyed: bool, runs: usize, per_call: usize, secs: f64) -> StartRate {
    #[allow(clippy::cast_precision_loss)] // a count of runs, far below 2^52
    let starts_per_s = runs as f64 / secs.max(f64::EPSILON);
    StartRate {
        how,
        keyed,
        runs,
        per_call,
        secs,
        starts_per_s,
    }
}

/// Measures `runs` starts each way.
pub(crate) async fn measure(url: &str, runs: usize) -> Result<Starts, BoxError> {
    let mut rates = Vec::new();
    let mut speedup = Vec::new();
    for keyed in [false, true] {
        eprintln!("pgbus-bench:   {runs} starts one by one (keys: {keyed})");
        let single = one_by_one(url, runs, keyed).await?;
        eprintln!("pgbus-bench:   {runs} starts in bulk (keys: {keyed})");
        let many = bulk(url, runs, keyed).await?;
        speedup.push((keyed, many.starts_per_s / single.starts_per_s));
        rates.push(single);
        rates.push(many);
    }
    Ok(Starts { rates, speedup })
}
