//! What registration writes (the limits in force, replaced per workflow and
//! upserted per queue; a changed limit frees its held rows), what a worker
//! builder refuses, and the concurrency key every start records.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    Entry, EntryKind, Error, FlowControl, Rate, SlotHolder, StartOptions, StepOptions, Workflow,
};

use super::{Job, Steps, claim, held_by, job_key, limited, register, runs_of, start};
use crate::pg::TestDb;

const fn step(name: &'static str, rate_limit: Option<Rate>) -> Entry {
    Entry {
        name,
        method: Some(name),
        kind: EntryKind::Step,
        options: StepOptions {
            wait_ms: 0,
            timeout_ms: None,
            skip_if: None,
            queue: None,
            priority: None,
            wait_for: None,
            on_batch_failure: None,
            on_exception: &[],
            rate_limit,
        },
    }
}

limited!(
    Everything(Steps),
    flow: FlowControl {
        concurrency: Some(10),
        has_key: true,
        key_concurrency: Some(1),
        slot: SlotHolder::Run,
        rate_limit: Some(Rate { count: 100, period_ms: 60_000 }),
        key_rate_limit: Some(Rate { count: 5, period_ms: 1_000 }),
        ..FlowControl::NONE
    },
    key: job_key,
    entries: &[step("one", None), step("two", Some(Rate { count: 2, period_ms: 250 })), step("three", None)],
);

limited!(
    KeyedTwo(Steps),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(2),
        ..FlowControl::NONE
    },
    key: job_key,
);

/// The rows of `flow_limits` and `rate_limits`, as `key=value` strings, sorted.
async fn limits(t: &TestDb) -> Vec<String> {
    let mut rows: Vec<String> = t
        .query(
            "SELECT key || '=' || max_in_flight || '/' || holder FROM {schema}.flow_limits \
             UNION ALL \
             SELECT key || '=' || max_starts || 'per' || period_ms FROM {schema}.rate_limits",
            &[],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_writes_the_limits_in_force_and_a_changed_limit_frees_its_held_rows() {
    let t = TestDb::new().await;
    let store = t.db.store();
    register(
        &t,
        "w1",
        &[Everything::DEFINITION],
        &[("bulk".to_owned(), 4), ("default".to_owned(), 50)],
    )
    .await;
    assert_eq!(
        limits(&t).await,
        [
            "key:flow.steps=1/run",
            "key:flow.steps=5per1000",
            "queue:bulk=4/step",
            "queue:default=50/step",
            "step:flow.steps/two=2per250",
            "workflow:flow.steps=10/run",
            "workflow:flow.steps=100per60000",
        ]
    );

    // Another deploy of the workflow replaces its rows; a worker that
    // declares no queue limit leaves the queues' alone, one that declares
    // one sets it.
    register(&t, "w2", &[KeyedTwo::DEFINITION], &[("bulk".to_owned(), 6)]).await;
    assert_eq!(
        limits(&t).await,
        [
            "key:flow.steps=2/step",
            "queue:bulk=6/step",
            "queue:default=50/step"
        ]
    );

    // Three runs of one key: two take its slots, the third is held. The
    // limit registered again unchanged changes nothing; removed (a deploy
    // without it), it frees the held row for the claim to decide again.
    t.execute(
        "DELETE FROM {schema}.flow_limits WHERE key LIKE 'queue:%'",
        &[],
    )
    .await;
    let defs = [KeyedTwo::DEFINITION];
    let runs = [
        start::<KeyedTwo>(&t, "k").await,
        start::<KeyedTwo>(&t, "k").await,
        start::<KeyedTwo>(&t, "k").await,
    ];
    assert_eq!(runs_of(&claim(&store, "w2", &defs, 4).await), runs[..2]);
    assert_eq!(
        held_by(&t, runs[2]).await.as_deref(),
        Some("key:flow.steps:k")
    );
    register(&t, "w2", &[KeyedTwo::DEFINITION], &[]).await;
    assert_eq!(
        held_by(&t, runs[2]).await.as_deref(),
        Some("key:flow.steps:k"),
        "the same limit again changes nothing"
    );
    register(&t, "w3", &[Steps::DEFINITION], &[]).await;
    assert_eq!(held_by(&t, runs[2]).await, None, "the limit removed");
    assert!(limits(&t).await.is_empty());
    assert_eq!(
        runs_of(&claim(&store, "w3", &[Steps::DEFINITION], 4).await),
        [runs[2]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_limit_is_checked_when_the_worker_is_built() {
    let t = TestDb::new().await;
    for (queue, limit) in [
        ("bulk", 0),
        ("bulk", pgbus_core::flow::MAX_CONCURRENCY + 1),
        ("", 3),
        ("two words", 3),
    ] {
        let error =
            t.db.worker()
                .register(Steps)
                .queue_concurrency(queue, limit)
                .build()
                .expect_err("a bad queue limit");
        assert!(
            matches!(&error, Error::InvalidSetting { setting, .. } if setting == "WorkerBuilder::queue_concurrency"),
            "{queue:?} {limit}: {error:?}"
        );
    }
    let worker =
        t.db.worker()
            .register(Steps)
            .queue_concurrency("default", 7)
            .queue_concurrency("default", 3)
            .queue_concurrency("bulk", pgbus_core::flow::MAX_CONCURRENCY)
            .build()
            .expect("a worker");
    assert_eq!(worker.run_once().await.expect("a claim"), 0);
    assert_eq!(
        limits(&t).await,
        ["queue:bulk=100000/step", "queue:default=3/step"],
        "registered with the worker, the last of a queue winning"
    );
}

/// A child per key given in the input, of the keyed workflow.
struct Parent;

#[workflow(name = "flow.parent", input = Vec<String>)]
impl Parent {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<String>>, fan: &mut FanOut) -> StepResult {
        for key in cx.input().clone() {
            fan.start::<KeyedTwo>(&Job::new(key))?;
        }
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_start_records_the_runs_concurrency_key() {
    let t = TestDb::new().await;
    let client = t.client();
    let key_of = |run| {
        let t = &t;
        async move { t.run(run).await.concurrency_key }
    };

    // From the key method; a key given at start wins; none without either.
    let derived = start::<KeyedTwo>(&t, "from-input").await;
    assert_eq!(key_of(derived).await.as_deref(), Some("from-input"));
    let given = client
        .start_with::<KeyedTwo>(
            &Job::new("ignored"),
            &StartOptions::new().concurrency_key("given"),
        )
        .await
        .expect("a start")
        .run_id;
    assert_eq!(key_of(given).await.as_deref(), Some("given"));
    let plain = start::<Steps>(&t, "unused").await;
    assert_eq!(key_of(plain).await, None);
    let only_given = client
        .start_with::<Steps>(
            &Job::new("x"),
            &StartOptions::new().concurrency_key("tenant-7"),
        )
        .await
        .expect("a start")
        .run_id;
    assert_eq!(key_of(only_given).await.as_deref(), Some("tenant-7"));

    // Many at once, and in the caller's transaction.
    let many = client
        .start_many::<KeyedTwo>([
            (Job::new("m1"), StartOptions::new()),
            (
                Job::new("m2"),
                StartOptions::new().concurrency_key("m-given"),
            ),
        ])
        .await
        .expect("starts");
    assert_eq!(key_of(many[0].run_id).await.as_deref(), Some("m1"));
    assert_eq!(key_of(many[1].run_id).await.as_deref(), Some("m-given"));
    let mut conn = t.db.pool().get().await.expect("a connection");
    let tx = conn.transaction().await.expect("a transaction");
    let inside = client
        .start_in::<KeyedTwo>(&*tx, &Job::new("in-tx"))
        .await
        .expect("a start")
        .run_id;
    tx.commit().await.expect("commit");
    assert_eq!(key_of(inside).await.as_deref(), Some("in-tx"));

    // A key a start would refuse, given or derived, is the start's error.
    for (job, options) in [
        (Job::new("ok"), StartOptions::new().concurrency_key("  ")),
        (Job::new(""), StartOptions::new()),
        (Job::new("a".repeat(256)), StartOptions::new()),
        (Job::new("tab\there"), StartOptions::new()),
    ] {
        let error = client
            .start_with::<KeyedTwo>(&job, &options)
            .await
            .expect_err("a bad key");
        assert!(
            matches!(
                error,
                Error::InvalidStartOption {
                    option: "concurrency_key",
                    ..
                }
            ),
            "{job:?}: {error:?}"
        );
    }

    // Fan-out children take their workflow's key.
    let parent = client
        .start::<Parent>(&vec!["c1".to_owned(), "c2".to_owned()])
        .await
        .expect("a start")
        .run_id;
    let worker = t.db.worker().register(Parent).build().expect("a worker");
    assert_eq!(worker.run_once().await.expect("a claim"), 1);
    let keys: Vec<Option<String>> = t
        .query(
            "SELECT concurrency_key FROM {schema}.runs WHERE parent_batch_id IS NOT NULL ORDER BY id",
            &[],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(keys, [Some("c1".to_owned()), Some("c2".to_owned())]);
    let _ = (parent, <KeyedTwo as Workflow>::DEFINITION);
}
