//! Steps per second: runs of five no-op steps, all started up front, through
//! one worker in this process at a given concurrency, until every run finished.

use std::time::Duration;

use pgbus_runtime::RunId;
use tokio::sync::mpsc;

use crate::BoxError;
use crate::cpu::{CpuShare, Ticks};
use crate::runner::{Progress, RunningWorker, await_count, await_ended, start_runs};
use crate::schema::{BenchSchema, checkpoint};
use crate::wire::{WireCounts, WireProxy};
use crate::workflows::{FiveSteps, Parked};

/// Steps per run of [`FiveSteps`].
const STEPS_PER_RUN: u32 = 5;

/// The most runs one measurement starts, whatever the pilot says.
const MAX_RUNS: u32 = 40_000;

/// How often the benchmark checks that a batch's outcomes are committed, once
/// every body has run (a few outcomes in flight take milliseconds).
const FINISH_POLL: Duration = Duration::from_millis(10);

/// The batch's runs that finished. `$1`, `$2`: its first and last run id.
const FINISHED_RUNS: &str = "
SELECT count(*) FROM {schema}.runs WHERE id BETWEEN $1 AND $2 AND status = 'finished'";

/// The batch's completed steps. `$1`, `$2`: its first and last run id.
const COMPLETED_STEPS: &str = "
SELECT count(*) FROM {schema}.steps WHERE run_id BETWEEN $1 AND $2 AND status = 'completed'";

/// Where Postgres's write-ahead log is now, in bytes from its start.
const WAL_POSITION: &str = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";

/// A batch's figures from its step rows, all on the database clock: how many
/// steps completed, from the first claim to the last outcome, and the steady
/// part, the middle 80% of completions (the ramp-up while the first claims
/// fill the slots, and the tail while the last runs drain with slots idle,
/// left out). `$1`, `$2`: its first and last run id.
const BATCH_FIGURES: &str = "
WITH done AS (
    SELECT started_at, finished_at
    FROM {schema}.steps
    WHERE run_id BETWEEN $1 AND $2 AND status = 'completed'
), steady AS (
    SELECT percentile_disc(0.1) WITHIN GROUP (ORDER BY finished_at) AS from_at,
           percentile_disc(0.9) WITHIN GROUP (ORDER BY finished_at) AS to_at
    FROM done
)
SELECT (SELECT count(*) FROM done) AS steps,
       (SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM done) AS span_s,
       (SELECT count(*) FROM done, steady
        WHERE done.finished_at > steady.from_at AND done.finished_at <= steady.to_at) AS steady_steps,
       (SELECT extract(epoch FROM to_at - from_at)::float8 FROM steady) AS steady_s";

/// One batch measured.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Throughput {
    /// The worker's `concurrency`.
    pub(crate) concurrency: usize,
    /// Runs in the measured batch.
    pub(crate) runs: u32,
    /// Step attempts that completed (`runs` × 5).
    pub(crate) steps: i64,
    /// Steps per second over the steady middle 80% of completions: the figure.
    pub(crate) steps_per_s: f64,
    /// Steps over the whole batch, first claim to last outcome.
    pub(crate) overall_steps_per_s: f64,
    /// First claim to last outcome, seconds.
    pub(crate) elapsed_s: f64,
    /// The CPU from the worker's start to the last run finished.
    pub(crate) cpu: CpuShare,
    /// WAL Postgres wrote over the same span, per completed step.
    pub(crate) wal_bytes_per_step: f64,
    /// What the worker said to Postgres per step, counted on the wire in a
    /// batch of its own (see [`wire_batch`]); `None` when the server is not
    /// on a TCP address.
    pub(crate) wire: Option<WirePerStep>,
}

/// Round trips, statements and commits per completed step, counted by a
/// [`WireProxy`] between a worker's pool and the server (`crate::wire`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct WirePerStep {
    /// Steps the counted batch completed.
    pub(crate) steps: i64,
    /// Client turns per step.
    pub(crate) round_trips: f64,
    /// Statements (`CommandComplete`s, `BEGIN` and `COMMIT` included) per step.
    pub(crate) statements: f64,
    /// Committed transactions per step.
    pub(crate) commits: f64,
    /// Milliseconds per step in which some connection waited on the server
    /// (`crate::wire`'s server time).
    pub(crate) server_ms: f64,
    /// Milliseconds per step in which none did: the worker's own time, and
    /// the proxy's hop.
    pub(crate) worker_ms: f64,
}

/// Measures steps per second at `concurrency` in `bench`'s schema. A pilot
/// batch (which also warms the server's caches) sizes the measured batch to
/// take about `secs`, so every concurrency is measured over about as long, on
/// any machine. `with_parked` registers [`Parked`] too, as a worker serving
/// runs parked in the schema would.
pub(crate) async fn measure(
    bench: &BenchSchema,
    concurrency: usize,
    secs: f64,
    with_parked: bool,
) -> Result<Throughput, BoxError> {
    let admin = bench.admin().await?;
    let pilot_runs = 10 + 4 * u32::try_from(concurrency)?;
    let pilot = batch(bench, &admin, concurrency, pilot_runs, with_parked).await?;
    let wanted = (pilot.overall_steps_per_s * secs / f64::from(STEPS_PER_RUN)).ceil();
    // Float-to-int `as` saturates (NaN gives 0), and the clamp bounds it
    // either way.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let runs = (wanted as u32).clamp(pilot_runs, MAX_RUNS);
    let mut measured = batch(bench, &admin, concurrency, runs, with_parked).await?;
    measured.wire = wire_batch(bench, &admin, concurrency, pilot_runs, with_parked).await?;
    Ok(measured)
}

/// A batch of `runs` runs whose worker talks to Postgres through a
/// [`WireProxy`]: its counts from the worker's start to the last run
/// finished, over the steps completed. The runs are started outside the
/// proxy (the starts are not steps). Not timed: the proxy adds a hop.
async fn wire_batch(
    bench: &BenchSchema,
    admin: &tokio_postgres::Client,
    concurrency: usize,
    runs: u32,
    with_parked: bool,
) -> Result<Option<WirePerStep>, BoxError> {
    let Some(server) = bench.tcp_server() else {
        return Ok(None);
    };
    let proxy = WireProxy::start(server).await?;
    let db = bench.connect_via(proxy.port()).await?;
    let prepared = prepare(&bench.db().client(), &db, concurrency, runs, with_parked).await?;
    proxy.mark();
    let from: WireCounts = proxy.counts();
    let worker = prepared.run_to_end(bench, admin, runs).await?;
    let counted = proxy.counts().since(from);
    worker.stop().await?;
    let steps = i64::from(runs * STEPS_PER_RUN);
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let per_step = |count: u64| count as f64 / steps as f64;
    Ok(Some(WirePerStep {
        steps,
        round_trips: per_step(counted.round_trips),
        statements: per_step(counted.statements),
        commits: per_step(counted.commits),
        server_ms: counted.server.as_secs_f64() * 1e3 / steps as f64,
        worker_ms: counted.span().saturating_sub(counted.server).as_secs_f64() * 1e3 / steps as f64,
    }))
}

/// Starts `runs` runs, then runs a fresh worker until all of them finished,
/// stops it, and reads the batch's figures from its step rows.
///
/// The batch runs on a `Database` of its own, so each batch starts from the
/// same state whatever ran before it. (Before the claim's shape was fixed, a
/// pool kept from the pilot reused plans cached while the due queue was a
/// pilot's few hundred rows, and C = 16 fell from about 1,200 to under 40
/// steps per second; the claim now has one plan whatever the statistics, see
/// `BENCHMARKS.md`.)
async fn batch(
    bench: &BenchSchema,
    admin: &tokio_postgres::Client,
    concurrency: usize,
    runs: u32,
    with_parked: bool,
) -> Result<Throughput, BoxError> {
    let db = bench.connect_again().await?;
    let prepared = prepare(&db.client(), &db, concurrency, runs, with_parked).await?;
    let range = prepared.range;
    checkpoint(admin).await;
    let wal_from: i64 = admin.query_one(WAL_POSITION, &[]).await?.get(0);
    let ticks = Ticks::read();
    let worker = prepared.run_to_end(bench, admin, runs).await?;
    let cpu = ticks.share_until(Ticks::read());
    let wal_to: i64 = admin.query_one(WAL_POSITION, &[]).await?.get(0);
    worker.stop().await?;

    let row = admin
        .query_one(&bench.sql(BATCH_FIGURES), &[&range[0], &range[1]])
        .await?;
    let steps: i64 = row.get("steps");
    let span_s: f64 = row.get("span_s");
    let steady_steps: i64 = row.get("steady_steps");
    let steady_s: f64 = row.get("steady_s");
    if steps != i64::from(runs * STEPS_PER_RUN) {
        return Err(format!(
            "{runs} runs finished with {steps} completed steps, not {}",
            runs * STEPS_PER_RUN
        )
        .into());
    }
    Ok(Throughput {
        concurrency,
        runs,
        steps,
        steps_per_s: per_second(steady_steps, steady_s),
        overall_steps_per_s: per_second(steps, span_s),
        elapsed_s: span_s,
        cpu,
        #[allow(clippy::cast_precision_loss)] // bytes and steps far below 2^52
        wal_bytes_per_step: (wal_to - wal_from) as f64 / steps as f64,
        wire: None,
    })
}

/// A batch's runs started and its worker built, not yet running.
struct Prepared {
    /// The first and last run id.
    range: [i64; 2],
    ended: mpsc::UnboundedReceiver<RunId>,
    builder: pgbus_runtime::WorkerBuilder,
}

/// Starts `runs` runs of [`FiveSteps`] through `starter` and builds a
/// worker on `db` at `concurrency` (with [`Parked`] when `with_parked`).
async fn prepare(
    starter: &pgbus_runtime::Client,
    db: &pgbus_runtime::Database,
    concurrency: usize,
    runs: u32,
    with_parked: bool,
) -> Result<Prepared, BoxError> {
    let started = start_runs::<FiveSteps>(starter, runs).await?;
    let (ended_tx, ended) = mpsc::unbounded_channel::<RunId>();
    let mut builder = db
        .worker()
        .register(FiveSteps { ended: ended_tx })
        .concurrency(concurrency);
    if with_parked {
        builder = builder.register(Parked);
    }
    Ok(Prepared {
        range: [started.first.0, started.last.0],
        ended,
        builder,
    })
}

impl Prepared {
    /// Runs the worker until every run of the batch finished (its bodies
    /// ran and its outcomes are committed); returns it still running.
    async fn run_to_end(
        mut self,
        bench: &BenchSchema,
        admin: &tokio_postgres::Client,
        runs: u32,
    ) -> Result<RunningWorker, BoxError> {
        let worker = RunningWorker::spawn(self.builder.build()?);
        let range = self.range;
        let progress = Progress {
            admin,
            query: bench.sql(COMPLETED_STEPS),
            params: vec![&range[0], &range[1]],
        };
        await_ended(&mut self.ended, runs, &progress).await?;
        await_count(
            admin,
            &bench.sql(FINISHED_RUNS),
            &[&range[0], &range[1]],
            i64::from(runs),
            FINISH_POLL,
        )
        .await?;
        Ok(worker)
    }
}

/// `count / secs`, or 0 for an empty span (a batch too small to have one).
fn per_second(count: i64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}
