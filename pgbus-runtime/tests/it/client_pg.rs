//! The client on a real server: idempotent starts, reading a missing run, and
//! listing runs with filters and pages.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunFilter, RunId, RunStatus};

use crate::pg::{TestDb, events, steps, t0};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Payment {
    cents: i64,
}

struct Charge;

#[workflow(name = "client.charge", input = Payment)]
impl Charge {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Payment>) {}
}

struct Refund;

#[workflow(name = "client.refund", input = Payment)]
impl Refund {
    #[step]
    async fn refund(&self, _cx: &mut StepCx<Payment>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_start_with_a_key_returns_the_first_run_and_starts_nothing() {
    let t = TestDb::new().await;
    let client = t.client();
    let first = client
        .start_idempotent::<Charge>(&Payment { cents: 100 }, "order-7")
        .await
        .expect("start");
    assert!(first.created);

    let second = client
        .start_idempotent::<Charge>(&Payment { cents: 999 }, "order-7")
        .await
        .expect("start again");
    assert_eq!(second.run_id, first.run_id);
    assert!(!second.created);

    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 1);
    let view = t.run(first.run_id).await;
    assert_eq!(
        view.input,
        serde_json::json!({"cents": 100}),
        "the first input"
    );
    assert_eq!(view.idempotency_key.as_deref(), Some("order-7"));
    assert_eq!(steps(&view), ["charge#1 scheduled/-"]);
    assert_eq!(events(&view), ["started"]);

    // Also once the run has finished.
    let worker = t.db.worker().register(Charge).build().expect("worker");
    worker.run_until_idle().await.expect("run");
    let third = client
        .start_idempotent::<Charge>(&Payment { cents: 1 }, "order-7")
        .await
        .expect("start after it finished");
    assert_eq!(third.run_id, first.run_id);
    assert!(!third.created);
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blank_idempotency_keys_are_refused() {
    let t = TestDb::new().await;
    let client = t.client();
    for key in ["", " ", "\t\n", "\u{a0}\u{2003}"] {
        let error = client
            .start_idempotent::<Charge>(&Payment { cents: 1 }, key)
            .await
            .expect_err("a blank key");
        assert!(
            matches!(error, Error::BlankIdempotencyKey),
            "{key:?}: {error:?}"
        );
    }
    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_with_one_key_create_one_run() {
    let t = TestDb::new().await;
    let others = [t.second_connection().await, t.second_connection().await];
    let mut starts = tokio::task::JoinSet::new();
    for i in 0..12_i64 {
        let client = match i % 3 {
            0 => t.client(),
            n => others[usize::try_from(n - 1).expect("small")].client(),
        };
        starts.spawn(async move {
            client
                .start_idempotent::<Charge>(&Payment { cents: i }, "shared-key")
                .await
        });
    }
    let mut results = Vec::new();
    while let Some(result) = starts.join_next().await {
        results.push(result.expect("no panic").expect("start"));
    }
    assert_eq!(results.iter().filter(|s| s.created).count(), 1);
    let run_id = results[0].run_id;
    assert!(results.iter().all(|s| s.run_id == run_id));
    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 1);
    assert_eq!(t.count("SELECT count(*) FROM {schema}.steps", &[]).await, 1);
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.events", &[]).await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_workflows_may_use_the_same_key() {
    let t = TestDb::new().await;
    let client = t.client();
    let charge = client
        .start_idempotent::<Charge>(&Payment { cents: 5 }, "k")
        .await
        .expect("start");
    let refund = client
        .start_idempotent::<Refund>(&Payment { cents: 5 }, "k")
        .await
        .expect("start");
    assert!(charge.created && refund.created);
    assert_ne!(charge.run_id, refund.run_id);
    assert_eq!(t.run(refund.run_id).await.run.workflow, "client.refund");
    // And runs without a key are not constrained.
    let a = client
        .start::<Charge>(&Payment { cents: 5 })
        .await
        .expect("start")
        .run_id;
    let b = client
        .start::<Charge>(&Payment { cents: 5 })
        .await
        .expect("start")
        .run_id;
    assert_ne!(a, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_missing_run_is_run_not_found() {
    let t = TestDb::new().await;
    let error = t
        .client()
        .run(RunId(424_242))
        .await
        .expect_err("no such run");
    assert!(
        matches!(
            error,
            Error::RunNotFound {
                run_id: RunId(424_242)
            }
        ),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_runs_filters_by_workflow_and_status_and_pages_back() {
    let t = TestDb::new().await;
    let client = t.client();
    let mut charges = Vec::new();
    let mut refunds = Vec::new();
    for i in 0..5 {
        charges.push(
            client
                .start::<Charge>(&Payment { cents: i })
                .await
                .expect("start")
                .run_id,
        );
        refunds.push(
            client
                .start::<Refund>(&Payment { cents: i })
                .await
                .expect("start")
                .run_id,
        );
    }
    // Refunds finish; charges stay ready.
    let worker = t.db.worker().register(Refund).build().expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 5);

    let ids = |runs: &[pgbus_runtime::RunSummary]| runs.iter().map(|r| r.id).collect::<Vec<_>>();
    let newest_first = |mut v: Vec<RunId>| {
        v.reverse();
        v
    };

    let all = client.list_runs(&RunFilter::default()).await.expect("list");
    assert_eq!(all.len(), 10);
    assert!(all.windows(2).all(|w| w[0].id > w[1].id), "newest first");

    let charge_runs = client
        .list_runs(&RunFilter::new().workflow("client.charge"))
        .await
        .expect("list");
    assert_eq!(ids(&charge_runs), newest_first(charges.clone()));
    assert!(charge_runs.iter().all(|r| r.status == RunStatus::Ready));
    assert!(charge_runs.iter().all(|r| r.created_at == t0()));

    let finished = client
        .list_runs(&RunFilter::new().status(RunStatus::Finished))
        .await
        .expect("list");
    assert_eq!(ids(&finished), newest_first(refunds.clone()));
    assert!(finished.iter().all(|r| r.finished_at == Some(t0())));

    let none = client
        .list_runs(
            &RunFilter::new()
                .workflow("client.charge")
                .status(RunStatus::Finished),
        )
        .await
        .expect("list");
    assert!(none.is_empty());

    // Pages of two, going back with `before`.
    let mut paged = Vec::new();
    let mut before = None;
    for _ in 0..4 {
        let page = client
            .list_runs(&{
                let mut page = RunFilter::new().workflow("client.charge").limit(2);
                page.before = before;
                page
            })
            .await
            .expect("list");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        paged.extend(ids(&page));
    }
    assert_eq!(
        paged,
        newest_first(charges),
        "three pages, then an empty one"
    );
}

struct Anything;

#[workflow(name = "client.anything", input = serde_json::Value)]
impl Anything {
    #[step]
    async fn only(&self, _cx: &mut StepCx<serde_json::Value>) {}
}

fn nested(depth: usize) -> serde_json::Value {
    (0..depth).fold(serde_json::json!(0), |inner, _| serde_json::json!([inner]))
}

/// One input rule at every start: too deep to read back, over 1 MiB, or
/// with a NUL character is a typed error and stores nothing (it used to be
/// stored, then break every view of the run, or fail as a raw database
/// error); at the limits, the run starts and reads back.
#[tokio::test]
async fn inputs_that_could_not_be_stored_or_read_back_are_refused_at_the_start() {
    let t = TestDb::new().await;
    let client = t.client();
    let big = serde_json::json!("x".repeat(pgbus_runtime::context::MAX_INPUT_BYTES));
    for (input, says) in [
        (nested(101), "100 levels"),
        (big, "1 MiB"),
        (serde_json::json!({ "note": "a\u{0}b" }), "NUL"),
    ] {
        match client.start::<Anything>(&input).await {
            Err(Error::InvalidInput { reason }) => assert!(reason.contains(says), "{reason}"),
            other => panic!("{says}: {other:?}"),
        }
        let conn = t.db.pool().get().await.expect("a connection");
        match client.start_in::<Anything>(&**conn, &input).await {
            Err(Error::InvalidInput { .. }) => {}
            other => panic!("{says}, in a transaction: {other:?}"),
        }
    }
    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 0);

    let deep = client
        .start::<Anything>(&nested(100))
        .await
        .expect("100 levels")
        .run_id;
    assert_eq!(t.run(deep).await.input, nested(100), "and it reads back");
}

/// The sizes are the deployment's: a database built with smaller limits
/// refuses what the defaults accept, saying the configured size, and one
/// with larger limits takes what the defaults refuse. (The testkit's
/// `TestEnv::limits` is held to the same rule by its own test.)
#[tokio::test]
async fn input_and_payload_sizes_are_settings() {
    let t = TestDb::new().await;
    let with = |limits: pgbus_runtime::Limits| {
        pgbus_runtime::Database::builder(&crate::pg::database_url())
            .schema(t.db.schema().clone())
            .clock(t.db.clock().clone())
            .limits(limits)
            .connect()
    };
    let small = with(
        pgbus_runtime::Limits::default()
            .input_bytes(64)
            .signal_payload_bytes(32),
    )
    .await
    .expect("connect")
    .client();
    match small
        .start::<Anything>(&serde_json::json!("x".repeat(70)))
        .await
    {
        Err(Error::InvalidInput { reason }) => {
            assert_eq!(reason, "an input is at most 64 bytes of JSON");
        }
        other => panic!("{other:?}"),
    }
    let run = small
        .start::<Anything>(&serde_json::json!("small"))
        .await
        .expect("a small input")
        .run_id;
    // (No step waits for `s`: unchecked, so only the sizes are judged.)
    match small.signal_unchecked(run, "s", &"y".repeat(40)).await {
        Err(Error::InvalidSignal { reason }) => {
            assert_eq!(reason, "a signal payload is at most 32 bytes of JSON");
        }
        other => panic!("{other:?}"),
    }
    small
        .signal_unchecked(run, "s", "ok")
        .await
        .expect("a small payload");

    let big_input = serde_json::json!("x".repeat(pgbus_runtime::context::MAX_INPUT_BYTES));
    assert!(matches!(
        t.client().start::<Anything>(&big_input).await,
        Err(Error::InvalidInput { .. })
    ));
    let large = with(pgbus_runtime::Limits::default().input_bytes(2 << 20))
        .await
        .expect("connect")
        .client();
    let run = large
        .start::<Anything>(&big_input)
        .await
        .expect("within 2 MiB")
        .run_id;
    assert_eq!(t.run(run).await.input, big_input);
}

/// A bounded read in the database keeps exactly what `RunRead::cut` keeps
/// of the whole run (the memory store's read), on a run shaped to strain
/// it: two attempts with one start each, a third that parked 500 times,
/// 300 pauses, an end, 40 signals and outputs of every size. Every kept
/// attempt keeps its first start, and the latest N paused periods survive
/// the end event.
#[tokio::test]
async fn a_bounded_read_keeps_what_the_cut_of_the_whole_run_keeps() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client
        .start::<Anything>(&serde_json::json!({"note": "x".repeat(300)}))
        .await
        .expect("start")
        .run_id;
    t.execute(
        "WITH steps AS (
             INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, outcome,
                 queue, priority, scheduled_at, started_at, finished_at, output, created_at)
             SELECT $1, 'client.anything', 's' || n, 1, 'completed', 'completed', 'default', 0,
                 now(), now(), now(), to_jsonb(repeat('o', n * 100)), now()
             FROM generate_series(1, 3) AS n
             RETURNING id, step_name
         )
         INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
         SELECT $1, id, step_name, 1, kind, 'worker', now()
         FROM steps, LATERAL (
             SELECT 'step_started' AS kind
             UNION ALL
             SELECT 'step_waiting' FROM generate_series(1, 500) WHERE step_name = 's3'
         ) AS marks",
        &[&run.0],
    )
    .await;
    t.execute(
        "INSERT INTO {schema}.events (run_id, event, actor, created_at)
         SELECT $1, kind, 'ops', now() + make_interval(secs => n * 2 + k)
         FROM generate_series(1, 300) AS n, (VALUES ('paused', 0), ('resumed', 1)) AS e(kind, k)
         ORDER BY n, k",
        &[&run.0],
    )
    .await;
    t.execute(
        "INSERT INTO {schema}.events (run_id, event, actor, created_at)
         VALUES ($1, 'finished', 'worker', now() + interval '1 hour')",
        &[&run.0],
    )
    .await;
    for n in 0..40_i32 {
        client
            .signal_unchecked(
                run,
                "poke",
                &"p".repeat(usize::try_from(n).unwrap_or(0) * 20),
            )
            .await
            .expect("signal");
    }
    let whole = client
        .run_with(run, pgbus_runtime::RunRead::latest(usize::MAX))
        .await
        .expect("the whole run");
    assert_eq!(
        whole.counts.events,
        i64::try_from(whole.events.len()).expect("small"),
        "nothing cut"
    );
    for read in [
        pgbus_runtime::RunRead::latest(1),
        pgbus_runtime::RunRead::latest(2).value_bytes(250),
        pgbus_runtime::RunRead::latest(3).value_bytes(100),
        pgbus_runtime::RunRead::latest(10).value_bytes(400),
        pgbus_runtime::RunRead::latest(1_000),
    ] {
        let read_here = client.run_with(run, read).await.expect("a bounded read");
        assert_eq!(read_here, read.cut(whole.clone()), "{read:?}");
        let started: std::collections::HashSet<i64> = read_here
            .events
            .iter()
            .filter(|e| e.event == "step_started")
            .filter_map(|e| e.step_id)
            .collect();
        assert!(
            read_here
                .steps
                .iter()
                .filter(|s| s.started_at.is_some())
                .all(|s| started.contains(&s.id)),
            "{read:?}: every kept attempt keeps its start"
        );
        let periods = pgbus_runtime::timeline::paused_periods(
            &read_here,
            chrono::Utc::now() + chrono::Duration::days(1),
        )
        .len();
        assert!(
            periods >= read.kept().min(300),
            "{read:?}: {periods} paused periods"
        );
    }
}

/// More workflow names than a skip scan may look at, all with finished runs
/// only, sorting before a workflow with a paused run: a prefix, an exact name
/// and the overview still find the paused one.
#[tokio::test]
async fn reads_by_workflow_find_a_name_after_a_thousand_others() {
    let t = TestDb::new().await;
    t.execute(
        "INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, input,
                                    created_at, updated_at, finished_at)
         SELECT format('aaa.wf_%s', lpad(i::text, 4, '0')), 'd', 'o', 'finished', 'null',
                $1, $1, $1
         FROM generate_series(1, 1001) i",
        &[&t0()],
    )
    .await;
    t.execute(
        "INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, input,
                                    created_at, updated_at, paused_at)
         VALUES ('orders.fulfil', 'd', 'o', 'paused', 'null', $1, $1, $1),
                ('orders_fulfil', 'd', 'o', 'paused', 'null', $1, $1, $1)",
        &[&t0()],
    )
    .await;
    let client = t.client();
    let names = |filter: RunFilter| {
        let client = client.clone();
        async move {
            client
                .list_runs(&filter)
                .await
                .expect("a list")
                .into_iter()
                .map(|run| run.workflow)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        names(RunFilter::new().workflow_prefix("orders.")).await,
        ["orders.fulfil"],
        "a prefix is a range of names, its `.` no wildcard"
    );
    assert_eq!(
        names(RunFilter::new().workflow_prefix("orders_")).await,
        ["orders_fulfil"],
        "a prefix's `_` is no wildcard"
    );
    assert_eq!(
        names(
            RunFilter::new()
                .workflow("orders.fulfil")
                .status(RunStatus::Paused)
        )
        .await,
        ["orders.fulfil"]
    );
    assert_eq!(
        names(RunFilter::new().workflow_prefix("aaa.wf_1"))
            .await
            .len(),
        2,
        "aaa.wf_1000 and aaa.wf_1001"
    );
    let overview = client.overview().await.expect("an overview");
    assert_eq!(
        overview
            .workflows
            .iter()
            .map(|w| (w.workflow.as_str(), w.paused))
            .collect::<Vec<_>>(),
        [("orders.fulfil", 1), ("orders_fulfil", 1)]
    );
    assert!(!overview.workflows_cut);
}

/// A step row whose time the driver cannot read (`infinity`, written by
/// hand: the engine never writes one) makes the run's read a typed error
/// naming the column, not a panic.
#[tokio::test]
async fn a_step_time_the_driver_cannot_read_is_a_corrupt_row() {
    let t = TestDb::new().await;
    t.execute(
        "INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, input,
                                    created_at, updated_at)
         VALUES ('orders.fulfil', 'd', 'o', 'ready', 'null', $1, $1)",
        &[&t0()],
    )
    .await;
    t.execute(
        "INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue,
                                     priority, scheduled_at, created_at)
         SELECT id, workflow, 'reserve', 1, 'scheduled', 'default', 0, 'infinity', $1
         FROM {schema}.runs",
        &[&t0()],
    )
    .await;
    let run = t
        .client()
        .list_runs(&RunFilter::new())
        .await
        .expect("the list reads no step time")[0]
        .id;
    match t.client().run(run).await {
        Err(pgbus_runtime::Error::Corrupt(what)) => {
            assert!(what.contains("column `scheduled_at`"), "{what}");
        }
        other => panic!("a corrupt row, not {other:?}"),
    }
}
