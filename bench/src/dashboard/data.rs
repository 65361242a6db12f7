//! The dashboard benchmark's data: `bench/sql/dashboard_data.sql` run in a
//! fresh bench schema at a given number of runs, then vacuumed, analyzed and
//! counted. The SQL says what the data looks like; this runs its parts in
//! order on one connection (its temporary tables live in that session) and
//! times each.

use std::time::Instant;

use crate::BoxError;
use crate::schema::{BenchSchema, checkpoint};

/// The generator, with `{schema}` and `{runs}` to fill in; its parts each
/// begin with a line `-- @ name`.
const DATA_SQL: &str = include_str!("../../sql/dashboard_data.sql");

/// What marks the start of a part.
const PART: &str = "\n-- @ ";

/// The tables the load fills, vacuumed and analyzed after it.
const TABLES: [&str; 5] = ["runs", "steps", "events", "signals", "batches"];

/// What the schema holds once loaded, counted from its tables.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Shape {
    pub(crate) runs: i64,
    /// Runs per status, by status name.
    pub(crate) runs_by_status: Vec<(String, i64)>,
    /// Runs of each workflow, by name.
    pub(crate) runs_by_workflow: Vec<(String, i64)>,
    /// Runs that are fan-out children (`parent_batch_id` set).
    pub(crate) child_runs: i64,
    /// Runs with an idempotency key.
    pub(crate) keyed_runs: i64,
    /// Step rows (attempts).
    pub(crate) steps: i64,
    /// Attempts that failed (reattempted or paused on).
    pub(crate) failed_steps: i64,
    /// Attempts parked on a signal or a batch.
    pub(crate) waiting_steps: i64,
    /// The most attempts one run has.
    pub(crate) most_attempts: i64,
    pub(crate) events: i64,
    pub(crate) signals: i64,
    pub(crate) batches: i64,
    pub(crate) open_batches: i64,
    /// The tables' sizes with their indexes and TOAST, MiB: runs, steps,
    /// events.
    pub(crate) mib: Vec<(String, f64)>,
    /// Seconds each part of the load took, then the vacuum.
    pub(crate) load_s: Vec<(String, f64)>,
}

/// The generator's text for `runs` runs in `bench`'s schema.
pub(crate) fn sql(bench: &BenchSchema, runs: u64) -> String {
    bench.sql(&DATA_SQL.replace("{runs}", &runs.to_string()))
}

/// Fills `bench`'s fresh schema with `runs` runs and their rows, vacuums and
/// analyzes the tables, checkpoints, and counts what is there.
pub(crate) async fn generate(bench: &BenchSchema, runs: u64) -> Result<Shape, BoxError> {
    if runs == 0 {
        return Err("the dashboard data needs at least one run".into());
    }
    // A connection of its own: neither its settings nor its temporary tables
    // reach the engine's pool. The load is one commit per part; not waiting
    // for each flush changes nothing that is measured.
    let admin = bench.admin().await?;
    admin
        .batch_execute("SET synchronous_commit = off; SET work_mem = '64MB'")
        .await?;
    let text = sql(bench, runs);
    let mut load_s = Vec::new();
    // Whatever precedes the first part is the file's header comment.
    for part in text.split(PART).skip(1) {
        let (name, body) = part.split_once('\n').unwrap_or((part, ""));
        let name = name.trim().to_owned();
        let began = Instant::now();
        admin
            .batch_execute(body)
            .await
            .map_err(|e| format!("dashboard data, part `{name}`: {e:?}"))?;
        let secs = began.elapsed().as_secs_f64();
        eprintln!("pgbus-bench:   dashboard data: {name} in {secs:.1} s");
        load_s.push((name, secs));
    }
    let began = Instant::now();
    for table in TABLES {
        admin
            .batch_execute(&bench.sql(&format!("VACUUM (ANALYZE) {{schema}}.{table}")))
            .await?;
    }
    checkpoint(&admin).await;
    let secs = began.elapsed().as_secs_f64();
    eprintln!("pgbus-bench:   dashboard data: vacuum and analyze in {secs:.1} s");
    load_s.push(("vacuum, analyze, checkpoint".to_owned(), secs));
    let mut shape = count(bench, &admin).await?;
    shape.load_s = load_s;
    Ok(shape)
}

/// Counts what `bench`'s schema holds.
pub(crate) async fn count(
    bench: &BenchSchema,
    admin: &tokio_postgres::Client,
) -> Result<Shape, BoxError> {
    let one = |sql: &str| bench.sql(sql);
    let row = admin
        .query_one(
            &one("SELECT (SELECT count(*) FROM {schema}.runs),
                         (SELECT count(*) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL),
                         (SELECT count(*) FROM {schema}.runs WHERE idempotency_key IS NOT NULL),
                         (SELECT count(*) FROM {schema}.steps),
                         (SELECT count(*) FROM {schema}.steps WHERE status = 'failed'),
                         (SELECT count(*) FROM {schema}.steps WHERE status = 'waiting'),
                         (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {schema}.steps
                                                          GROUP BY run_id) a),
                         (SELECT count(*) FROM {schema}.events),
                         (SELECT count(*) FROM {schema}.signals),
                         (SELECT count(*) FROM {schema}.batches),
                         (SELECT count(*) FROM {schema}.batches WHERE status = 'open')"),
            &[],
        )
        .await?;
    let pairs = |sql: String| async move {
        let rows = admin.query(&sql, &[]).await?;
        Ok::<_, BoxError>(
            rows.iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>(),
        )
    };
    let runs_by_status = pairs(one(
        "SELECT status, count(*) FROM {schema}.runs GROUP BY 1 ORDER BY 2 DESC",
    ))
    .await?;
    let runs_by_workflow = pairs(one(
        "SELECT workflow, count(*) FROM {schema}.runs GROUP BY 1 ORDER BY 1",
    ))
    .await?;
    let mut mib = Vec::new();
    for table in ["runs", "steps", "events"] {
        let bytes: i64 = admin
            .query_one(
                "SELECT pg_total_relation_size(format('%I.%I', $1::text, $2::text)::regclass)",
                &[&bench.name(), &table],
            )
            .await?
            .get(0);
        #[allow(clippy::cast_precision_loss)] // bytes, far below 2^52
        mib.push((table.to_owned(), bytes as f64 / f64::from(1 << 20)));
    }
    Ok(Shape {
        runs: row.get(0),
        runs_by_status,
        runs_by_workflow,
        child_runs: row.get(1),
        keyed_runs: row.get(2),
        steps: row.get(3),
        failed_steps: row.get(4),
        waiting_steps: row.get(5),
        most_attempts: row.get(6),
        events: row.get(7),
        signals: row.get(8),
        batches: row.get(9),
        open_batches: row.get(10),
        mib,
        load_s: Vec::new(),
    })
}
