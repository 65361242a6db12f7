//! The definition registry (issue 19) on Postgres: what a worker records when
//! it starts, version-aware claims through a rolling deploy, the sweep's grace
//! rule with real workers, worker names and the registry's listing.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, EventKind, RunStatus};

use crate::pg::{TestDb, events, steps};

/// The first version of a workflow...
struct ShipV1;

#[workflow(name = "registry.ship", input = u32)]
impl ShipV1 {
    #[step]
    async fn pack(&self, _cx: &mut StepCx<u32>) {}

    removed_step!(weigh);

    #[step(wait_for = "ship.go", wait_timeout = "1h")]
    async fn send(&self, _cx: &mut StepCx<u32>) {}
}

/// ...and the second, which adds `label` between them.
struct ShipV2;

#[workflow(name = "registry.ship", input = u32)]
impl ShipV2 {
    #[step]
    async fn pack(&self, _cx: &mut StepCx<u32>) {}

    removed_step!(weigh);

    #[step]
    async fn label(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait_for = "ship.go", wait_timeout = "1h")]
    async fn send(&self, _cx: &mut StepCx<u32>) {}
}

/// Another workflow, on a queue of its own.
struct Audit;

#[workflow(name = "registry.audit", queue = "audit")]
impl Audit {
    #[step]
    async fn check(&self, _cx: &mut StepCx<()>) {}
}

async fn registry_rows(t: &TestDb) -> (i64, i64, i64) {
    (
        t.count("SELECT count(*) FROM {schema}.workers", &[]).await,
        t.count("SELECT count(*) FROM {schema}.worker_definitions", &[])
            .await,
        t.count("SELECT count(*) FROM {schema}.definitions", &[])
            .await,
    )
}

#[tokio::test]
async fn a_worker_records_what_it_runs_once_per_digest_and_idempotently() {
    let t = TestDb::new().await;
    let worker =
        t.db.worker()
            .name("api-1")
            .concurrency(3)
            .register(ShipV2)
            .register(Audit)
            .build()
            .expect("worker");
    assert_eq!(worker.name(), "api-1");
    worker.run_once().await.expect("a claim registers");
    assert_eq!(registry_rows(&t).await, (1, 2, 2));
    let row = &t
        .query(
            "SELECT name, concurrency, queues FROM {schema}.workers WHERE id = $1",
            &[&worker.id()],
        )
        .await[0];
    assert_eq!(
        row.get::<_, Option<String>>("name").as_deref(),
        Some("api-1")
    );
    assert_eq!(row.get::<_, Option<i32>>("concurrency"), Some(3));
    assert_eq!(
        row.get::<_, Vec<String>>("queues"),
        ["audit".to_owned(), "default".to_owned()]
    );
    let plan: serde_json::Value = t
        .query(
            "SELECT step_plan FROM {schema}.definitions WHERE digest = $1",
            &[&ShipV2::DEFINITION.digest],
        )
        .await[0]
        .get(0);
    assert_eq!(
        plan,
        serde_json::json!([
            {"name": "pack", "kind": "step", "queue": "default", "wait_for": null},
            {"name": "weigh", "kind": "removed", "queue": "default", "wait_for": null},
            {"name": "label", "kind": "step", "queue": "default", "wait_for": null},
            {"name": "send", "kind": "step", "queue": "default", "wait_for": "ship.go"},
        ])
    );

    // Written again after the sweep removed the row: the same rows, once.
    t.execute("DELETE FROM {schema}.workers", &[]).await;
    assert_eq!(registry_rows(&t).await, (0, 0, 2), "links go with the row");
    worker.heartbeat().await.expect("heartbeat");
    worker.heartbeat().await.expect("heartbeat");
    assert_eq!(registry_rows(&t).await, (1, 2, 2));

    // A second worker of the same definitions shares their rows.
    let other = t.db.worker().register(ShipV2).build().expect("worker");
    other.run_once().await.expect("a claim registers");
    assert_eq!(registry_rows(&t).await, (2, 3, 2));
    assert_eq!(other.name(), other.id(), "the id by default");

    // The registry as an operator reads it.
    let live = t
        .client()
        .workers(Duration::from_secs(30), 10)
        .await
        .expect("workers");
    let names: Vec<&str> = live.iter().filter_map(|w| w.name.as_deref()).collect();
    assert_eq!(names, ["api-1", other.id()]);
    let digests: Vec<(&str, &str)> = live[0]
        .workflows
        .iter()
        .map(|w| (w.workflow.as_str(), w.digest.as_str()))
        .collect();
    assert_eq!(
        digests,
        [
            ("registry.audit", Audit::DEFINITION.digest),
            ("registry.ship", ShipV2::DEFINITION.digest)
        ]
    );
    assert_eq!(live[0].concurrency, Some(3));
    assert_eq!(live[0].in_flight, 0);

    // A long silence: the sweep removes the rows and their links, and the
    // definitions stay, keyed by digest.
    t.clock.advance(Duration::from_hours(2));
    let report = other.sweep().await.expect("sweep");
    assert_eq!(report.workers_removed, 2);
    assert_eq!(registry_rows(&t).await, (0, 0, 2));
    assert!(
        t.client()
            .workers(Duration::from_secs(30), 10)
            .await
            .expect("workers")
            .is_empty()
    );
}

#[tokio::test]
async fn a_worker_name_must_be_printable_and_bounded() {
    let t = TestDb::new().await;
    let long = "n".repeat(101);
    for bad in ["", "   ", " padded", "line\nbreak", long.as_str()] {
        let built = t.db.worker().name(bad).register(Audit).build();
        assert!(
            matches!(&built, Err(Error::InvalidSetting { setting, .. }) if setting == "WorkerBuilder::name"),
            "{bad:?}: {:?}",
            built.err()
        );
    }
    let ok =
        t.db.worker()
            .name("eu-west/pod-7 (canary)")
            .register(Audit)
            .build();
    assert_eq!(ok.expect("a fine name").name(), "eu-west/pod-7 (canary)");
}

/// Whether any run of `runs` is paused.
async fn any_paused(t: &TestDb, runs: &[RunId]) -> bool {
    for &run in runs {
        if t.run(run).await.run.status == RunStatus::Paused {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one deploy, step by step
async fn a_rolling_deploy_defers_a_new_step_to_new_workers_and_never_pauses() {
    let t = TestDb::new().await;
    let client = t.client();
    let old = t.db.worker().register(ShipV1).build().expect("v1 worker");
    let new = t.db.worker().register(ShipV2).build().expect("v2 worker");
    let mut v1_runs = Vec::new();
    let mut v2_runs = Vec::new();
    for n in 0..3 {
        v1_runs.push(client.start::<ShipV1>(&n).await.expect("start").run_id);
        v2_runs.push(client.start::<ShipV2>(&n).await.expect("start").run_id);
    }
    // Only the old worker runs at first: it packs every run, and leaves the
    // new runs' `label` (which it lacks) to a worker that has it.
    old.run_until_idle().await.expect("run");
    for &run in &v2_runs {
        let view = t.run(run).await;
        assert_eq!(view.run.status, RunStatus::Ready);
        assert_eq!(
            steps(&view),
            ["pack#1 completed/completed", "label#1 scheduled/-"]
        );
    }
    for &run in &v1_runs {
        let view = t.run(run).await;
        assert_eq!(
            view.run.current_step.as_deref(),
            Some("send"),
            "parked for its signal"
        );
    }
    // Ten minutes on, both workers alive: the grace rule pauses nothing, as
    // the new worker has `label`.
    t.clock.advance(Duration::from_mins(10));
    old.heartbeat().await.expect("heartbeat");
    new.heartbeat()
        .await
        .expect("a heartbeat registers the new worker");
    assert_eq!(old.sweep().await.expect("sweep").undefined_paused, 0);
    new.run_until_idle().await.expect("run");
    assert!(!any_paused(&t, &v1_runs).await && !any_paused(&t, &v2_runs).await);
    for &run in &v2_runs {
        let view = t.run(run).await;
        assert_eq!(view.run.current_step.as_deref(), Some("send"));
        let changes: Vec<&serde_json::Value> = view
            .events
            .iter()
            .filter(|e| e.event == EventKind::DefinitionChanged)
            .filter_map(|e| e.details.as_ref())
            .collect();
        assert_eq!(
            changes,
            [
                &serde_json::json!({"old_digest": ShipV2::DEFINITION.digest, "new_digest": ShipV1::DEFINITION.digest}),
                &serde_json::json!({"old_digest": ShipV1::DEFINITION.digest, "new_digest": ShipV2::DEFINITION.digest}),
            ],
            "once per change of hands"
        );
        let marks: Vec<(&str, &str)> = pgbus_runtime::timeline::definition_changes(&view)
            .iter()
            .map(|c| (c.old_digest.as_str(), c.new_digest.as_str()))
            .map(|(a, b)| {
                (
                    if a == ShipV1::DEFINITION.digest {
                        "v1"
                    } else {
                        "v2"
                    },
                    if b == ShipV1::DEFINITION.digest {
                        "v1"
                    } else {
                        "v2"
                    },
                )
            })
            .collect();
        assert_eq!(marks, [("v2", "v1"), ("v1", "v2")], "the timeline's marks");
    }

    // Every old worker is replaced: the old one stops heartbeating. Old
    // clients still start v1 runs; the new workers finish everything.
    drop(old);
    let late_v1 = client.start::<ShipV1>(&9).await.expect("start").run_id;
    v1_runs.push(late_v1);
    t.clock.advance(Duration::from_mins(10));
    new.heartbeat().await.expect("heartbeat");
    new.run_until_idle().await.expect("run");
    assert_eq!(new.sweep().await.expect("sweep").undefined_paused, 0);
    for &run in v1_runs.iter().chain(&v2_runs) {
        client.signal(run, "ship.go", &()).await.expect("signal");
    }
    new.run_until_idle().await.expect("run");
    for &run in v1_runs.iter().chain(&v2_runs) {
        let view = t.run(run).await;
        assert_eq!(view.run.status, RunStatus::Finished, "{:?}", events(&view));
    }
    let late = t.run(late_v1).await;
    assert_eq!(
        steps(&late),
        ["pack#1 completed/completed", "send#1 completed/completed"],
        "a v1 run keeps its own step list under v2 workers"
    );
}

/// The renamed-step case of `engine_pg::definitions`, with the clock moved
/// past the grace: the sweep pauses what no live worker has.
#[tokio::test]
async fn the_grace_rule_pauses_a_step_no_live_worker_has_only_after_the_grace() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(ShipV1)
            .undefined_step_grace(Some(Duration::from_mins(2)))
            .build()
            .expect("worker");
    let run = client.start::<ShipV2>(&1).await.expect("start").run_id;
    // A workflow no live worker registered waits, paused never.
    let orphan = client.start::<Audit>(&()).await.expect("start").run_id;
    worker.run_until_idle().await.expect("run");
    assert_eq!(worker.sweep().await.expect("sweep").undefined_paused, 0);
    t.clock.advance(Duration::from_secs(119));
    worker.heartbeat().await.expect("heartbeat");
    assert_eq!(
        worker.sweep().await.expect("sweep").undefined_paused,
        0,
        "within the grace"
    );
    t.clock.advance(Duration::from_secs(2));
    worker.heartbeat().await.expect("heartbeat");
    assert_eq!(worker.sweep().await.expect("sweep").undefined_paused, 1);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_runtime::error::StepNotDefined")
    );
    assert_eq!(
        steps(&view),
        ["pack#1 completed/completed", "label#1 failed/paused"]
    );
    assert_eq!(
        events(&view)[events(&view).len() - 2..],
        ["step_failed:label#1", "paused"]
    );
    assert_eq!(t.run(orphan).await.run.status, RunStatus::Ready);
    t.clock.advance(Duration::from_hours(1));
    worker.heartbeat().await.expect("heartbeat");
    assert_eq!(worker.sweep().await.expect("sweep").undefined_paused, 0);
    assert_eq!(
        t.run(orphan).await.run.status,
        RunStatus::Ready,
        "still waiting"
    );
}

/// Two workflows with the same step list: their digests (of the list alone)
/// are equal...
struct TwinA;

#[workflow(name = "registry.twin_a")]
impl TwinA {
    #[step]
    async fn check(&self, _cx: &mut StepCx<()>) {}
}

/// ...but each keeps its own plan (here: the signal its step waits for).
struct TwinB;

#[workflow(name = "registry.twin_b", queue = "twins")]
impl TwinB {
    #[step(wait_for = "twin.go")]
    async fn check(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test]
async fn workflows_with_one_step_list_keep_a_definition_each() {
    let t = TestDb::new().await;
    assert_eq!(
        TwinA::DEFINITION.digest,
        TwinB::DEFINITION.digest,
        "the digest hashes the step list alone"
    );
    let worker =
        t.db.worker()
            .register(TwinA)
            .register(TwinB)
            .build()
            .expect("worker");
    worker.run_once().await.expect("a claim registers");
    let plans: Vec<(String, serde_json::Value)> = t
        .query(
            "SELECT workflow, step_plan FROM {schema}.definitions ORDER BY workflow",
            &[],
        )
        .await
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        plans,
        [
            (
                "registry.twin_a".to_owned(),
                serde_json::json!([{"name": "check", "kind": "step", "queue": "default", "wait_for": null}])
            ),
            (
                "registry.twin_b".to_owned(),
                serde_json::json!([{"name": "check", "kind": "step", "queue": "twins", "wait_for": "twin.go"}])
            ),
        ]
    );
}
