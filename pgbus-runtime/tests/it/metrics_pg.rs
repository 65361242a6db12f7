//! What the worker reports through the `metrics` facade, read back from a
//! debugging recorder installed for this test's thread (a current-thread
//! runtime, so every task of the worker runs on it).

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use pgbus_runtime::prelude::*;

use crate::pg::TestDb;

struct Measured;

#[workflow(name = "metrics.measured")]
impl Measured {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<()>) {}
}

/// `(kind, name, labels sorted)` of a key.
fn describe(key: &CompositeKey) -> (MetricKind, String, Vec<(String, String)>) {
    let mut labels: Vec<(String, String)> = key
        .key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    labels.sort();
    (key.kind(), key.key().name().to_owned(), labels)
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    labels
}

#[tokio::test(flavor = "current_thread")]
async fn steps_latencies_stalls_and_run_gauges_are_reported() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let t = TestDb::new().await;
    let client = t.client();
    let done = client.start::<Measured>(&()).await.expect("start").run_id;
    let held = client.start::<Measured>(&()).await.expect("start").run_id;
    let stalled = client.start::<Measured>(&()).await.expect("start").run_id;
    client.pause(held, "ops", "hold").await.expect("pause");
    let worker =
        t.db.worker()
            .register(Measured)
            .run_gauges(true)
            .stall_threshold(Duration::from_mins(1))
            .build()
            .expect("worker");
    // `done` runs to its end; `stalled` is claimed and left in progress, past
    // its stall horizon (the pinned clock moves on).
    worker.run_once().await.expect("run");
    t.execute(
        "UPDATE {schema}.steps SET status = 'in_progress', worker_id = 'gone',
                started_at = $2, stall_at = $2
         WHERE run_id = $1 AND status = 'scheduled'",
        &[&stalled.0, &t.clock.now()],
    )
    .await;
    t.execute(
        "UPDATE {schema}.runs SET status = 'performing' WHERE id = $1",
        &[&stalled.0],
    )
    .await;
    t.clock.advance(Duration::from_secs(1));
    worker.run_until_idle().await.expect("run");
    assert_eq!(
        client.run(done).await.expect("run").run.status,
        pgbus_runtime::RunStatus::Finished
    );
    let report = worker.sweep().await.expect("sweep");
    assert_eq!(report.repaired, 1);

    let snapshot = snapshotter.snapshot().into_vec();
    let find = |kind: MetricKind, name: &str, want: &[(&str, &str)]| -> Option<&DebugValue> {
        snapshot
            .iter()
            .find(|(key, _, _, _)| describe(key) == (kind, name.to_owned(), labels(want)))
            .map(|(_, _, _, value)| value)
    };
    let completed = |step: &str| {
        find(
            MetricKind::Counter,
            "pgbus_steps_total",
            &[
                ("workflow", "metrics.measured"),
                ("step", step),
                ("outcome", "completed"),
            ],
        )
    };
    assert_eq!(
        completed("one"),
        Some(&DebugValue::Counter(2)),
        "{snapshot:#?}"
    );
    assert_eq!(completed("two"), Some(&DebugValue::Counter(1)));
    let Some(DebugValue::Histogram(durations)) = find(
        MetricKind::Histogram,
        "pgbus_step_duration_seconds",
        &[("workflow", "metrics.measured"), ("step", "one")],
    ) else {
        panic!("a step duration histogram: {snapshot:#?}");
    };
    assert_eq!(durations.len(), 2);
    let Some(DebugValue::Histogram(pickups)) = find(
        MetricKind::Histogram,
        "pgbus_step_pickup_latency_seconds",
        &[("workflow", "metrics.measured")],
    ) else {
        panic!("a pickup latency histogram: {snapshot:#?}");
    };
    assert_eq!(pickups.len(), 3, "one per attempt started");
    assert_eq!(
        find(
            MetricKind::Counter,
            "pgbus_stalls_total",
            &[("detection", "timeout")]
        ),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        find(
            MetricKind::Counter,
            "pgbus_sweep_repairs_total",
            &[("repair", "stalled_attempt")]
        ),
        Some(&DebugValue::Counter(1))
    );
    // After the sweep: `held` and the stalled run (paused by the stall action)
    // are paused; nothing is ready or running.
    let gauge = |status: &str| find(MetricKind::Gauge, "pgbus_runs", &[("status", status)]);
    assert_eq!(gauge("paused"), Some(&DebugValue::Gauge(2.0.into())));
    assert_eq!(gauge("ready"), Some(&DebugValue::Gauge(0.0.into())));
    assert_eq!(gauge("performing"), Some(&DebugValue::Gauge(0.0.into())));
}
