//! The dashboard data at a thousandth of its size, in a schema of its own
//! (dropped afterwards): its counts and links hold, and the engine's own
//! reads, the ones the dashboard's pages make, accept every kind of run it
//! has.

use std::time::Duration;

use pgbus_runtime::view::RunFilter;
use pgbus_runtime::window::WINDOWS;
use pgbus_runtime::{InsightsFilter, RunId, RunStatus};

use super::data;
use crate::schema::BenchSchema;

/// A thousandth of the benchmark's million runs.
const RUNS: u64 = 1_000;

async fn scalar(bench: &BenchSchema, admin: &tokio_postgres::Client, sql: &str) -> i64 {
    admin.query_one(&bench.sql(sql), &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_thousandth_of_the_data_holds_together_and_reads_back() {
    let bench = BenchSchema::create(&pgbus_testkit::test_database_url())
        .await
        .unwrap();
    let shape = data::generate(&bench, RUNS).await.unwrap();
    let admin = bench.admin().await.unwrap();

    // The shape the benchmark describes: every run, about five step rows a
    // run, more events than steps, every status, fan-out and keys.
    assert_eq!(shape.runs, 1_000, "{shape:?}");
    assert!((4_500..=5_500).contains(&shape.steps), "{shape:?}");
    assert!(shape.events > 2 * shape.steps, "{shape:?}");
    for status in RunStatus::ALL {
        assert!(
            shape
                .runs_by_status
                .iter()
                .any(|(s, n)| s == status.as_str() && *n > 0),
            "no {} run: {shape:?}",
            status.as_str()
        );
    }
    assert_eq!(shape.runs_by_workflow.len(), 9, "{shape:?}");
    assert!(shape.batches >= 2 && shape.child_runs >= 40, "{shape:?}");
    assert!(shape.keyed_runs > 0 && shape.signals > 0, "{shape:?}");
    assert!(
        shape.failed_steps > 0 && shape.waiting_steps > 0,
        "{shape:?}"
    );
    // The long run: 50 polls, and its two other steps (each may have been
    // reattempted too).
    assert!((52..=56).contains(&shape.most_attempts), "{shape:?}");

    links_hold(&bench, &admin).await;
    engine_reads_accept(&bench, &admin).await;
}

/// Links: each batch counts its children and names its parent's fan-out
/// step; each signal was consumed by a step of its run; each run's events
/// follow its time in id order; ids go on from the loaded ones.
async fn links_hold(bench: &BenchSchema, admin: &tokio_postgres::Client) {
    let broken_batches = scalar(
        bench,
        admin,
        "SELECT count(*) FROM {schema}.batches b
         WHERE b.total <> (SELECT count(*) FROM {schema}.runs c WHERE c.parent_batch_id = b.id)
            OR NOT EXISTS (SELECT 1 FROM {schema}.steps s
                           WHERE s.id = b.parent_step_id AND s.run_id = b.run_id)",
    )
    .await;
    assert_eq!(broken_batches, 0);
    let stray_signals = scalar(
        bench,
        admin,
        "SELECT count(*) FROM {schema}.signals g
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.steps s
                           WHERE s.id = g.consumed_by AND s.run_id = g.run_id)",
    )
    .await;
    assert_eq!(stray_signals, 0);
    let events_back_in_time = scalar(
        bench,
        admin,
        "SELECT count(*) FROM (
             SELECT created_at < lag(created_at) OVER (PARTITION BY run_id ORDER BY id) AS back
             FROM {schema}.events) e
         WHERE back",
    )
    .await;
    assert_eq!(events_back_in_time, 0);
    let next_run: i64 = admin
        .query_one(
            &bench.sql("SELECT nextval(pg_get_serial_sequence('{schema}.runs', 'id'))"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next_run, 1_001);
}

/// The engine's reads: the runs list, unfiltered and by each status, and
/// every run of a sample that has each workflow and status; the insights of
/// every window, the workers and the schedules. The loaded workers are made
/// live, as the benchmark does before each round.
async fn engine_reads_accept(bench: &BenchSchema, admin: &tokio_postgres::Client) {
    admin
        .batch_execute(&bench.sql("UPDATE {schema}.workers SET heartbeat_at = clock_timestamp()"))
        .await
        .unwrap();
    let client = bench.db().client();
    let all = client
        .list_runs(&RunFilter::new().limit(1_000))
        .await
        .unwrap();
    assert_eq!(all.len(), 1_000);
    for status in RunStatus::ALL {
        let listed = client
            .list_runs(&RunFilter::new().status(*status).limit(1_000))
            .await
            .unwrap();
        assert!(listed.iter().all(|r| r.status == *status));
    }
    let sample = admin
        .query(
            &bench.sql(
                "SELECT id FROM {schema}.runs WHERE id % 50 = 1
                 UNION SELECT max(id) FROM {schema}.runs GROUP BY workflow, status",
            ),
            &[],
        )
        .await
        .unwrap();
    for row in &sample {
        let id = RunId(row.get(0));
        let view = client.run(id).await.unwrap();
        assert!(!view.steps.is_empty() && !view.events.is_empty(), "{id:?}");
        assert!(view.unrunnable.is_none(), "{id:?}: the live workers run it");
    }

    let now = admin
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .unwrap()
        .get(0);
    for window in WINDOWS {
        let range = window.at(now, Some(Duration::from_hours(30 * 24)));
        let filter = InsightsFilter::new();
        client.run_counts(&range, &filter).await.unwrap();
        client.step_outcomes(&range, &filter).await.unwrap();
        client.slowest_steps(&range, &filter, 10).await.unwrap();
    }
    assert_eq!(
        client
            .workers(Duration::from_secs(30), 200)
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(client.list_schedules(None, 100).await.unwrap().len(), 12);
}
