//! Pickup latency with an idle worker: runs started one at a time, and each
//! first step's `started_at - scheduled_at` (both on the database clock: the
//! start's insert and the claim), as [`pgbus_runtime::StepView::queued`]
//! reads it from `Client::run`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pgbus_runtime::{Client, RunId};
use tokio::sync::mpsc;

use crate::BoxError;
use crate::runner::{Progress, RunningWorker, await_ended};
use crate::schema::BenchSchema;
use crate::workflows::FiveSteps;

/// `WorkerBuilder`'s default `poll_interval` (pgbus-runtime's worker.rs): with
/// notifications off, what bounds the pickup. The worker here keeps it.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// With notifications on, the pause after a run ended before the next starts,
/// so every start finds the worker idle, waiting on its `LISTEN`.
const GAP_AFTER_END: Duration = Duration::from_millis(20);

/// With notifications off, the mean gap between starts (drawn evenly from 0 to
/// twice this). Starts do not wait for pickup there: each would then land
/// just after the poll that picked up the last, always a whole interval
/// before the next poll, and 200 samples would take 200 intervals. Random
/// gaps land anywhere in the poll cycle, as real arrivals do.
const MEAN_GAP_POLLING: Duration = Duration::from_millis(50);

/// Runs started and finished before measuring, so the listener is up and the
/// pool's connections and statements are warm.
const WARM_UP_RUNS: u32 = 3;

/// One latency figure.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Latency {
    /// Whether the worker woke on `LISTEN/NOTIFY`.
    pub(crate) notifications: bool,
    /// The worker's poll interval, milliseconds.
    pub(crate) poll_interval_ms: u128,
    /// Runs measured.
    pub(crate) samples: usize,
    /// Median first-step pickup, milliseconds.
    pub(crate) p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub(crate) p99_ms: f64,
    /// The slowest.
    pub(crate) max_ms: f64,
}

/// Measures `samples` pickups in a fresh schema, with a worker of default
/// settings but `notifications`.
pub(crate) async fn measure(
    url: &str,
    notifications: bool,
    samples: usize,
) -> Result<Latency, BoxError> {
    let bench = BenchSchema::create(url).await?;
    let client = bench.db().client();
    let (ended_tx, mut ended) = mpsc::unbounded_channel::<RunId>();
    let worker = RunningWorker::spawn(
        bench
            .db()
            .worker()
            .register(FiveSteps { ended: ended_tx })
            .notifications(notifications)
            .build()?,
    );
    let admin = bench.admin().await?;
    let progress = Progress {
        admin: &admin,
        query: bench.sql("SELECT count(*) FROM {schema}.steps WHERE status = 'completed'"),
        params: Vec::new(),
    };
    for _ in 0..WARM_UP_RUNS {
        client.start::<FiveSteps>(&()).await?;
        await_ended(&mut ended, 1, &progress).await?;
    }

    let mut runs = Vec::with_capacity(samples);
    if notifications {
        for _ in 0..samples {
            runs.push(client.start::<FiveSteps>(&()).await?.run_id);
            await_ended(&mut ended, 1, &progress).await?;
            tokio::time::sleep(GAP_AFTER_END).await;
        }
    } else {
        let mut gaps = Gaps::seeded();
        for _ in 0..samples {
            runs.push(client.start::<FiveSteps>(&()).await?.run_id);
            tokio::time::sleep(gaps.next(MEAN_GAP_POLLING * 2)).await;
        }
        await_ended(&mut ended, u32::try_from(samples)?, &progress).await?;
    }
    worker.stop().await?;

    let mut pickups = first_step_pickups(&client, &runs).await?;
    pickups.sort_by(f64::total_cmp);
    Ok(Latency {
        notifications,
        poll_interval_ms: DEFAULT_POLL_INTERVAL.as_millis(),
        samples,
        p50_ms: nearest_rank(&pickups, 50),
        p99_ms: nearest_rank(&pickups, 99),
        max_ms: pickups.last().copied().unwrap_or(0.0),
    })
}

/// Each run's first step pickup, milliseconds.
async fn first_step_pickups(client: &Client, runs: &[RunId]) -> Result<Vec<f64>, BoxError> {
    let mut pickups = Vec::with_capacity(runs.len());
    for &run in runs {
        let view = client.run(run).await?;
        let queued = view
            .steps
            .iter()
            .find(|step| step.attempt == 1 && step.step_name == "s1")
            .and_then(pgbus_runtime::StepView::queued)
            .ok_or_else(|| format!("run {run} has no claimed first step"))?;
        // Microseconds, Postgres's resolution.
        let micros = queued.num_microseconds().unwrap_or(i64::MAX);
        pickups.push(micros as f64 / 1000.0);
    }
    Ok(pickups)
}

/// The `p`th percentile of `sorted` by the nearest-rank method: the smallest
/// value with at least p% of the samples at or below it.
pub(crate) fn nearest_rank(sorted: &[f64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Gaps drawn evenly from zero up to a bound: xorshift64*, seeded from the
/// clock. Only the spread matters, not the quality of the randomness.
struct Gaps(u64);

impl Gaps {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        // Never zero, which xorshift cannot leave.
        Self(u64::from(nanos) | 1)
    }

    fn next(&mut self, below: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let draw = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        // The top 53 bits as a fraction in [0, 1).
        let fraction = (draw >> 11) as f64 / (1_u64 << 53) as f64;
        below.mul_f64(fraction)
    }
}
