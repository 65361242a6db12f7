//! Cost as history grows: steps per second at concurrency 16 with finished
//! runs' step rows already in the schema, and with runs parked waiting on a
//! signal.

use std::time::{Duration, Instant};

use pgbus_runtime::Workflow as _;

use crate::BoxError;
use crate::runner::{RunningWorker, await_count, start_runs};
use crate::schema::{BenchSchema, checkpoint};
use crate::throughput::{self, Throughput};
use crate::workflows::{FiveSteps, NEVER, Parked};

/// The concurrency the history figures are measured at.
pub(crate) const CONCURRENCY: usize = 16;

/// Step rows per finished run of [`FiveSteps`].
const STEPS_PER_RUN: u64 = 5;

/// Finished runs added in one statement: copies of the oldest finished run of
/// the schema (a real one, from the empty measurement) and of its step rows,
/// `$1` of them, each 100 ms older than the last, ending a minute ago. The rows
/// are exactly what the engine writes for a finished run (status `finished`,
/// steps `completed`), recent enough that the sweep's 30-day retention leaves
/// them alone while measuring (5 million rows span under 28 hours). The
/// `started` and `step_*` events are not copied: the engine never reads
/// another run's events.
const LOAD_HISTORY: &str = "
WITH template AS (
    SELECT * FROM {schema}.runs
    WHERE status = 'finished' AND workflow = $2
    ORDER BY id
    LIMIT 1
), added AS (
    INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, current_step,
                               input, step_names, step_plan, created_at, updated_at,
                               finished_at)
    SELECT t.workflow, t.definition_digest, t.options_digest, t.status, t.current_step,
           t.input, t.step_names, t.step_plan, at.created, at.created + (t.updated_at - t.created_at),
           at.created + (t.finished_at - t.created_at)
    FROM template t
    CROSS JOIN generate_series(1, $1::bigint) g
    CROSS JOIN LATERAL (
        SELECT now() - interval '1 minute' - g * interval '100 milliseconds' AS created
    ) at
    RETURNING id, created_at
)
INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status, outcome,
                            queue, priority, timeout_ms, scheduled_at, started_at, finished_at,
                            stall_at, worker_id, output, created_at)
SELECT a.id, s.workflow, s.step_name, s.attempt, s.reattempts, s.status, s.outcome,
       s.queue, s.priority, s.timeout_ms,
       a.created_at + (s.scheduled_at - t.created_at),
       a.created_at + (s.started_at - t.created_at),
       a.created_at + (s.finished_at - t.created_at),
       a.created_at + (s.stall_at - t.created_at),
       s.worker_id, s.output,
       a.created_at + (s.created_at - t.created_at)
FROM added a
CROSS JOIN template t
JOIN {schema}.steps s ON s.run_id = t.id";

/// Finished step rows in the schema.
const FINISHED_STEPS: &str = "
SELECT count(*) FROM {schema}.steps s
JOIN {schema}.runs r ON r.id = s.run_id
WHERE r.status = 'finished' AND s.status = 'completed'";

/// Parked attempts waiting for the `never` signal. `$1`: its name.
const PARKED: &str = "
SELECT count(*) FROM {schema}.steps WHERE status = 'waiting' AND waiting_for = $1";

/// One figure of the history table.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct HistoryPoint {
    /// What was in the schema.
    pub(crate) label: String,
    /// Finished step rows in the schema while measuring.
    pub(crate) finished_step_rows: i64,
    /// Runs parked on a signal while measuring.
    pub(crate) parked_runs: i64,
    /// Seconds spent making that state: the bulk load and its `VACUUM
    /// ANALYZE`, or starting and parking the runs.
    pub(crate) setup_s: f64,
    /// The measurement.
    pub(crate) throughput: Throughput,
    /// Its steps per second as a percentage of the empty schema's (the
    /// parked runs' figure gets it once the empty one is measured).
    pub(crate) pct_of_empty: Option<f64>,
}

/// Measures the empty schema, then loads finished runs until the schema holds
/// each of `rows` finished step rows and measures again. One schema
/// throughout: each load adds to the last, and the runs of the measurements
/// themselves stay in history too (the counts say so).
pub(crate) async fn grow(
    url: &str,
    rows: [u64; 2],
    secs: f64,
) -> Result<Vec<HistoryPoint>, BoxError> {
    let bench = BenchSchema::create(url).await?;
    let admin = bench.admin().await?;
    let empty = throughput::measure(&bench, CONCURRENCY, secs, false).await?;
    let empty_rate = empty.steps_per_s;
    let mut points = vec![HistoryPoint {
        label: "empty".to_owned(),
        finished_step_rows: 0,
        parked_runs: 0,
        setup_s: 0.0,
        throughput: empty,
        pct_of_empty: Some(100.0),
    }];
    for target in rows {
        eprintln!("pgbus-bench: loading history up to {target} finished step rows");
        let began = Instant::now();
        let have = u64::try_from(count(&admin, &bench.sql(FINISHED_STEPS)).await?)?;
        let runs = target.saturating_sub(have) / STEPS_PER_RUN;
        load(&bench, runs).await?;
        let setup_s = began.elapsed().as_secs_f64();
        let finished_step_rows = count(&admin, &bench.sql(FINISHED_STEPS)).await?;
        eprintln!("pgbus-bench:   loaded in {setup_s:.1} s; measuring");
        let measured = throughput::measure(&bench, CONCURRENCY, secs, false).await?;
        points.push(HistoryPoint {
            label: format!("{} finished step rows", human(target)),
            finished_step_rows,
            parked_runs: 0,
            setup_s,
            pct_of_empty: Some(100.0 * measured.steps_per_s / empty_rate),
            throughput: measured,
        });
    }
    Ok(points)
}

/// Adds `runs` finished runs (five step rows each) in one statement, then
/// vacuums and analyzes them, and checkpoints.
async fn load(bench: &BenchSchema, runs: u64) -> Result<(), BoxError> {
    // A connection of its own: the setting must not reach the engine's pool.
    // It only spares the one commit from waiting for its flush; the rows are
    // logged like any others.
    let admin = bench.admin().await?;
    admin.batch_execute("SET synchronous_commit = off").await?;
    let added = admin
        .execute(
            &bench.sql(LOAD_HISTORY),
            &[&i64::try_from(runs)?, &FiveSteps::DEFINITION.name],
        )
        .await?;
    if added != runs * STEPS_PER_RUN {
        return Err(format!(
            "the history load added {added} step rows, not {}",
            runs * STEPS_PER_RUN
        )
        .into());
    }
    // A plain ANALYZE would leave the new rows for autovacuum, which the
    // insert threshold starts within a minute: in the middle of the
    // measurement. Vacuumed now, they are the settled history a live system
    // has (hint bits set, visibility map current). The checkpoint writes the
    // load's dirty pages now rather than under the measurement (which takes
    // one of its own too).
    for maintenance in ["runs", "steps"] {
        admin
            .batch_execute(&bench.sql(&format!("VACUUM (ANALYZE) {{schema}}.{maintenance}")))
            .await?;
    }
    checkpoint(&admin).await;
    Ok(())
}

/// Starts `runs` runs of [`Parked`] in a fresh schema, runs a worker until
/// every one parked on its signal, then measures steps per second beside them
/// with a worker that serves both workflows.
pub(crate) async fn parked(url: &str, runs: u32, secs: f64) -> Result<HistoryPoint, BoxError> {
    let bench = BenchSchema::create(url).await?;
    let admin = bench.admin().await?;
    let began = Instant::now();
    start_runs::<Parked>(&bench.db().client(), runs).await?;
    let worker = RunningWorker::spawn(
        bench
            .db()
            .worker()
            .register(Parked)
            .concurrency(CONCURRENCY)
            .build()?,
    );
    await_count(
        &admin,
        &bench.sql(PARKED),
        &[&NEVER],
        i64::from(runs),
        Duration::from_millis(100),
    )
    .await?;
    worker.stop().await?;
    let setup_s = began.elapsed().as_secs_f64();
    eprintln!("pgbus-bench:   {runs} runs parked in {setup_s:.1} s; measuring");
    let parked_runs = count_parked(&admin, &bench).await?;
    let measured = throughput::measure(&bench, CONCURRENCY, secs, true).await?;
    Ok(HistoryPoint {
        label: format!("{} runs parked on a signal", human(u64::from(runs))),
        finished_step_rows: 0,
        parked_runs,
        setup_s,
        pct_of_empty: None,
        throughput: measured,
    })
}

async fn count_parked(
    admin: &tokio_postgres::Client,
    bench: &BenchSchema,
) -> Result<i64, BoxError> {
    Ok(admin.query_one(&bench.sql(PARKED), &[&NEVER]).await?.get(0))
}

async fn count(admin: &tokio_postgres::Client, sql: &str) -> Result<i64, BoxError> {
    Ok(admin.query_one(sql, &[]).await?.get(0))
}

/// 5000000 as `5M`, 10000 as `10k`.
pub(crate) fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 100_000 == 0 => format_scaled(n, 1_000_000, "M"),
        n if n >= 1_000 && n % 100 == 0 => format_scaled(n, 1_000, "k"),
        n => n.to_string(),
    }
}

fn format_scaled(n: u64, unit: u64, suffix: &str) -> String {
    if n.is_multiple_of(unit) {
        format!("{}{suffix}", n / unit)
    } else {
        format!("{}.{}{suffix}", n / unit, n % unit * 10 / unit)
    }
}
