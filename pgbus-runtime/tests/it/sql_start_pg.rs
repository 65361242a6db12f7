//! The SQL entry point (issue 19): `{schema}.start_run(workflow, input,
//! idempotency_key, start_at)` starts a run of a registered workflow in the
//! caller's transaction, writing what `Client::start` writes, and refuses bad
//! arguments with a SQLSTATE and a message naming the problem. The SQL is
//! sent as psql sends what a user types: simple-query text, one string with
//! its `BEGIN` and `COMMIT` or `ROLLBACK`.

use std::time::Duration;

use pgbus_runtime::context::MAX_INPUT_BYTES;
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Registration, Store};
use pgbus_runtime::{RunStatus, WorkflowDefinition};
use tokio_postgres::SimpleQueryMessage;

use crate::pg::{TestDb, eventually};
use crate::start_in_pg::{Order, Ship, own_connection, rows, run_worker};

/// A workflow whose first step has every placement option: where a start
/// takes them from matters.
struct Placed;

#[workflow(name = "sql.placed", input = u32, queue = "placed")]
impl Placed {
    #[step(wait = "5s", queue = "first", priority = 3, timeout = "30s")]
    async fn prepare(&self, _cx: &mut StepCx<u32>) {}

    removed_step!(weigh);

    #[step(wait_for = "go")]
    async fn send(&self, _cx: &mut StepCx<u32>) {}
}

/// Two versions of one workflow, for which build a start picks.
struct PickV1;

#[workflow(name = "sql.pick", input = u32)]
impl PickV1 {
    #[step]
    async fn one(&self, _cx: &mut StepCx<u32>) {}
}

struct PickV2;

#[workflow(name = "sql.pick", input = u32)]
impl PickV2 {
    #[step]
    async fn one(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<u32>) {}
}

/// Registers worker `id` with `definitions`, as a worker does at start.
async fn register(t: &TestDb, id: &str, definitions: &[&'static WorkflowDefinition]) {
    let queues = vec!["default".to_owned()];
    t.db.store()
        .register_worker(&Registration {
            worker_id: id,
            name: id,
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 1,
            definitions,
            queue_limits: &[],
        })
        .await
        .expect("a registration");
}

/// Runs `sql` (`{schema}` replaced) as one simple query on a connection of
/// its own; the first column of the first row of its last result, if any.
async fn psql(t: &TestDb, sql: &str) -> Result<Option<String>, tokio_postgres::Error> {
    let app = own_connection().await;
    let messages = app.simple_query(&t.sql(sql)).await?;
    Ok(messages.iter().rev().find_map(|message| match message {
        SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    }))
}

/// The run id a `SELECT {schema}.start_run(...)` in `sql` returned.
async fn started(t: &TestDb, sql: &str) -> RunId {
    let id = psql(t, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .expect("a run id");
    RunId(id.parse().expect("a bigint"))
}

/// The error `sql` raises: (SQLSTATE, message, detail, hint).
async fn refused(t: &TestDb, sql: &str) -> (String, String, Option<String>, Option<String>) {
    let error = psql(t, sql).await.expect_err("refused");
    let db = error.as_db_error().expect("a server error");
    (
        db.code().code().to_owned(),
        db.message().to_owned(),
        db.detail().map(str::to_owned),
        db.hint().map(str::to_owned),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_start_leaves_nothing_and_a_committed_one_runs() {
    let t = TestDb::on_database_clock().await;
    let _worker = run_worker(&t).await;
    let registered = eventually(Duration::from_secs(5), || async {
        t.count("SELECT count(*) FROM {schema}.definition_starts", &[])
            .await
            == 1
    })
    .await;
    assert!(registered, "the worker registered `start_in.ship`");

    let gone = started(
        &t,
        "BEGIN; SELECT {schema}.start_run('start_in.ship', '{\"id\": 1}'); ROLLBACK;",
    )
    .await;
    assert_eq!(rows(&t).await, (0, 0, 0), "nothing after rollback");
    assert!(t.client().run(gone).await.is_err());

    let run = started(
        &t,
        "BEGIN; SELECT {schema}.start_run(workflow => 'start_in.ship', \
         input => '{\"id\": 2}'::jsonb); COMMIT;",
    )
    .await;
    // The worker polls once a minute: finishing within seconds means the
    // start's NOTIFY woke it at commit.
    let finished = eventually(Duration::from_secs(10), || async {
        t.run(run).await.run.status == RunStatus::Finished
    })
    .await;
    assert!(finished, "the worker ran the committed run");
    let view = t.run(run).await;
    assert_eq!(view.input, serde_json::json!(Order { id: 2 }));
    assert_eq!(view.run.workflow, Ship::DEFINITION.name);
    assert_eq!(rows(&t).await.0, 1, "only the committed run exists");
}

/// A run's rows as JSON, for comparing two starts: what does not depend on
/// the id or the moment of the start.
async fn written(t: &TestDb, run: RunId) -> serde_json::Value {
    let run_row = "SELECT to_jsonb(x) FROM (
        SELECT workflow, definition_digest, options_digest, status, current_step, input,
               idempotency_key, parent_batch_id, step_names, step_plan, error_class,
               updated_at = created_at AS unchanged, paused_at, finished_at
        FROM {schema}.runs WHERE id = $1) x";
    let step_rows = "SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.id), '[]') FROM (
        SELECT s.id, s.workflow, s.step_name, s.attempt, s.reattempts, s.status, s.outcome,
               s.queue, s.priority, s.timeout_ms,
               extract(epoch FROM s.scheduled_at - r.created_at) AS due_after_s,
               s.created_at = r.created_at AS created_with_run, s.started_at, s.worker_id,
               s.waiting_for, s.waiting_since
        FROM {schema}.steps s JOIN {schema}.runs r ON r.id = s.run_id WHERE s.run_id = $1) x";
    let event_rows = "SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.id), '[]') FROM (
        SELECT e.id, e.step_id, e.step_name, e.attempt, e.event, e.actor, e.reason, e.details,
               e.created_at = r.created_at AS at_start
        FROM {schema}.events e JOIN {schema}.runs r ON r.id = e.run_id WHERE e.run_id = $1) x";
    let mut rows = serde_json::Map::new();
    for (name, sql) in [
        ("run", run_row),
        ("steps", step_rows),
        ("events", event_rows),
    ] {
        let value: serde_json::Value = t.query(sql, &[&run.0]).await[0].get(0);
        rows.insert(name.to_owned(), value);
    }
    // Ids differ between the two runs; their order is what counts.
    for list in ["steps", "events"] {
        for row in rows[list].as_array_mut().into_iter().flatten() {
            if let Some(row) = row.as_object_mut() {
                row.remove("id");
            }
        }
    }
    serde_json::Value::Object(rows)
}

#[tokio::test]
async fn the_sql_start_writes_what_client_start_writes() {
    let t = TestDb::new().await;
    register(&t, "placed-worker", &[Placed::DEFINITION]).await;
    let client = t.client();
    let by_client = client
        .start_idempotent::<Placed>(&7, "by-client")
        .await
        .expect("a start")
        .run_id;
    let by_sql = started(
        &t,
        "SELECT {schema}.start_run('sql.placed', '7', 'by-client-too')",
    )
    .await;
    let mut expected = written(&t, by_client).await;
    expected["run"]["idempotency_key"] = serde_json::json!("by-client-too");
    assert_eq!(written(&t, by_sql).await, expected);
    let steps = &expected["steps"][0];
    assert_eq!(
        (
            &steps["queue"],
            &steps["priority"],
            &steps["timeout_ms"],
            &steps["due_after_s"]
        ),
        (
            &serde_json::json!("first"),
            &serde_json::json!(3),
            &serde_json::json!(30_000),
            &serde_json::json!(5.0)
        ),
        "the first step's placement and wait"
    );
    // The run goes on as any: read back through the client.
    let view = t.run(by_sql).await;
    assert_eq!(view.run.status, RunStatus::Ready);
    assert_eq!(view.input, serde_json::json!(7));
}

#[tokio::test]
async fn an_unknown_workflow_is_refused_with_the_registered_ones() {
    let t = TestDb::new().await;
    let (code, message, detail, hint) =
        refused(&t, "SELECT {schema}.start_run('sql.placed', '1')").await;
    assert_eq!(code, "42704");
    assert_eq!(
        message,
        "pgbus start_run: no worker registered workflow 'sql.placed'"
    );
    assert_eq!(detail.as_deref(), Some("No workflow is registered yet."));
    assert!(
        hint.is_some_and(|h| h.contains("WorkerBuilder::register")),
        "a hint"
    );

    register(&t, "w", &[Placed::DEFINITION, PickV1::DEFINITION]).await;
    let (code, message, detail, _) =
        refused(&t, "SELECT {schema}.start_run('sql.placd', '1')").await;
    assert_eq!(code, "42704");
    assert!(message.ends_with("workflow 'sql.placd'"), "{message}");
    assert_eq!(
        detail.as_deref(),
        Some("Registered workflows: 'sql.pick', 'sql.placed'.")
    );
    assert_eq!(rows(&t).await, (0, 0, 0));

    // Registered only by a worker of a version before the SQL entry point.
    t.execute(
        "INSERT INTO {schema}.definitions (digest, workflow, step_plan, created_at)
         VALUES ('old', 'sql.old', '[]', now())",
        &[],
    )
    .await;
    let (code, message, _, _) = refused(&t, "SELECT {schema}.start_run('sql.old', '1')").await;
    assert_eq!(code, "55000");
    assert!(
        message.contains("'sql.old' was registered only by"),
        "{message}"
    );
}

#[tokio::test]
async fn an_idempotency_key_returns_its_run() {
    let t = TestDb::new().await;
    register(&t, "w", &[Placed::DEFINITION, PickV1::DEFINITION]).await;
    let first = started(
        &t,
        "SELECT {schema}.start_run('sql.placed', '1', 'order-1')",
    )
    .await;
    let again = started(
        &t,
        "SELECT {schema}.start_run('sql.placed', '2', 'order-1')",
    )
    .await;
    assert_eq!(again, first, "the same key, the same run");
    assert_eq!(t.run(first).await.input, serde_json::json!(1), "untouched");
    let by_client = t
        .client()
        .start_idempotent::<Placed>(&3, "order-1")
        .await
        .expect("a start");
    assert_eq!(
        (by_client.run_id, by_client.created),
        (first, false),
        "one key space with the client's starts"
    );
    let other = started(&t, "SELECT {schema}.start_run('sql.pick', '1', 'order-1')").await;
    assert_ne!(other, first, "keys are per workflow");
    // In one transaction, twice: the second sees the first's run.
    let both = psql(
        &t,
        "BEGIN; SELECT {schema}.start_run('sql.placed', '4', 'order-4'); \
         SELECT {schema}.start_run('sql.placed', '5', 'order-4') \
              = {schema}.start_run('sql.placed', '6', 'order-4'); COMMIT;",
    )
    .await
    .expect("two starts");
    assert_eq!(both.as_deref(), Some("t"));
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE idempotency_key = 'order-4'",
            &[]
        )
        .await,
        1
    );
}

#[tokio::test]
async fn bad_arguments_are_refused_with_their_sqlstate() {
    let t = TestDb::new().await;
    register(&t, "w", &[Placed::DEFINITION]).await;
    let long = format!("'sql.placed', '1', '{}'", "k".repeat(256));
    let cases = [
        ("NULL, '1'", "22004", "pgbus start_run: workflow is NULL"),
        (
            "'sql.placed', NULL",
            "22004",
            "pgbus start_run: input is NULL",
        ),
        (
            "'sql.placed', '1', ' \t'",
            "22023",
            "pgbus start_run: an idempotency key cannot be empty or blank",
        ),
        (
            "'sql.placed', '1', E'a\\u0007b'",
            "22023",
            "pgbus start_run: an idempotency key must be at most 255 characters of visible text",
        ),
        (
            long.as_str(),
            "22023",
            "pgbus start_run: an idempotency key must be at most 255 characters of visible text",
        ),
        (
            "'sql.placed', '1', NULL, 'infinity'",
            "22023",
            "pgbus start_run: start_at must be a finite time, not infinity",
        ),
        (
            "'sql.placed', '1', NULL, '270000-01-01+00'",
            "22023",
            "pgbus start_run: start_at must be at most 36500 days ahead",
        ),
    ];
    for (args, code, message) in cases {
        let sql = format!("SELECT {{schema}}.start_run({args})");
        let (found, text, _, _) = refused(&t, &sql).await;
        assert_eq!((found.as_str(), text.as_str()), (code, message), "{args}");
    }
    // The keys Client::start_idempotent takes pass: 255 characters, inner
    // spaces.
    let fine = format!("'sql.placed', '1', '{} x'", "é".repeat(253));
    started(&t, &format!("SELECT {{schema}}.start_run({fine})")).await;
    assert_eq!(rows(&t).await.0, 1, "refusals store nothing");
}

/// Starts `input` from SQL: whether it was accepted, and (when not) the
/// SQLSTATE and message.
async fn sql_accepts(t: &TestDb, input: &serde_json::Value) -> Result<(), (String, String)> {
    let app = own_connection().await;
    let sql = t.sql("SELECT {schema}.start_run('sql.placed', $1::jsonb)");
    match app.query_one(&sql, &[input]).await {
        Ok(_) => Ok(()),
        Err(error) => {
            let db = error.as_db_error().expect("a server error");
            Err((db.code().code().to_owned(), db.message().to_owned()))
        }
    }
}

/// `value` with a `pad` string that makes its compact JSON exactly `bytes`.
fn padded(mut value: serde_json::Value, bytes: usize) -> serde_json::Value {
    value["pad"] = serde_json::json!("");
    let bare = serde_json::to_vec(&value).expect("JSON").len();
    value["pad"] = serde_json::json!("x".repeat(bytes - bare));
    assert_eq!(serde_json::to_vec(&value).expect("JSON").len(), bytes);
    value
}

#[tokio::test]
async fn the_input_limits_are_the_clients() {
    let t = TestDb::new().await;
    register(&t, "w", &[Placed::DEFINITION]).await;
    let too_big = (
        "54000".to_owned(),
        "pgbus start_run: invalid input: an input is at most 1 MiB of JSON".to_owned(),
    );
    // Shapes whose `jsonb::text` is longer than their compact JSON, strings
    // holding `, ` and `: ` and quotes among them.
    let items: Vec<serde_json::Value> = (0..20_000)
        .map(|i| serde_json::json!({"k": i, "v": "a, \"b\": c"}))
        .collect();
    for shape in [serde_json::json!({}), serde_json::json!({"items": items})] {
        for (bytes, expected) in [
            (MAX_INPUT_BYTES, Ok(())),
            (MAX_INPUT_BYTES + 1, Err(too_big.clone())),
        ] {
            let input = padded(shape.clone(), bytes);
            assert_eq!(
                pgbus_runtime::context::check_input(&input).is_ok(),
                expected.is_ok(),
                "the client's rule at {bytes} bytes"
            );
            assert_eq!(sql_accepts(&t, &input).await, expected, "{bytes} bytes");
        }
    }
    let nested = |levels: usize| -> serde_json::Value {
        let text = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        serde_json::from_str(&text).expect("JSON")
    };
    assert!(pgbus_runtime::context::check_input(&nested(100)).is_ok());
    assert_eq!(sql_accepts(&t, &nested(100)).await, Ok(()));
    assert!(pgbus_runtime::context::check_input(&nested(101)).is_err());
    assert_eq!(
        sql_accepts(&t, &nested(101)).await,
        Err((
            "54000".to_owned(),
            "pgbus start_run: invalid input: an input is at most 100 levels of arrays and \
             objects deep"
                .to_owned()
        ))
    );
}

#[tokio::test]
async fn start_at_sets_when_the_first_step_is_due() {
    let t = TestDb::new().await;
    register(&t, "w", &[Placed::DEFINITION]).await;
    let due = "SELECT extract(epoch FROM scheduled_at - $2::timestamptz)::float8
               FROM {schema}.steps WHERE run_id = $1";
    for at in ["2040-01-01T00:00:00Z", "2001-01-01T00:00:00Z"] {
        let run = started(
            &t,
            &format!("SELECT {{schema}}.start_run('sql.placed', '1', NULL, '{at}')"),
        )
        .await;
        let start_at: chrono::DateTime<chrono::Utc> = at.parse().expect("a time");
        let after: f64 = t.query(due, &[&run.0, &start_at]).await[0].get(0);
        assert!(
            (after - 5.0).abs() < f64::EPSILON,
            "due 5 s (the step's wait) after {at}: {after}"
        );
    }
}

#[tokio::test]
async fn the_newest_live_build_is_the_one_started() {
    let t = TestDb::new().await;
    register(&t, "old", &[PickV1::DEFINITION]).await;
    register(&t, "new", &[PickV2::DEFINITION]).await;
    let digest = |run: RunId| {
        let t = &t;
        async move {
            let row = t
                .query(
                    "SELECT definition_digest FROM {schema}.runs WHERE id = $1",
                    &[&run.0],
                )
                .await;
            row[0].get::<_, String>(0)
        }
    };
    let set = |id: &'static str, started: &'static str, heartbeat: &'static str| {
        let t = &t;
        async move {
            t.execute(
                &format!(
                    "UPDATE {{schema}}.workers SET started_at = now() - interval '{started}',
                            heartbeat_at = now() - interval '{heartbeat}' WHERE id = $1"
                ),
                &[&id],
            )
            .await;
        }
    };
    let start = "SELECT {schema}.start_run('sql.pick', '1')";
    // Both live: the build of the worker that started last (a rolling
    // deploy's new version).
    set("old", "1 hour", "1 second").await;
    set("new", "1 minute", "1 second").await;
    assert_eq!(
        digest(started(&t, start).await).await,
        PickV2::DEFINITION.digest
    );
    // A rollback: the old version's worker started last.
    set("old", "10 seconds", "1 second").await;
    assert_eq!(
        digest(started(&t, start).await).await,
        PickV1::DEFINITION.digest
    );
    // Only the old one live.
    set("old", "1 hour", "1 second").await;
    set("new", "1 minute", "31 seconds").await;
    assert_eq!(
        digest(started(&t, start).await).await,
        PickV1::DEFINITION.digest
    );
    // None live: the build registered last.
    set("old", "1 hour", "1 hour").await;
    t.execute(
        "UPDATE {schema}.definition_starts SET created_at = now() - interval '1 day'
         WHERE options_digest = $1",
        &[&PickV1::DEFINITION.options_digest],
    )
    .await;
    assert_eq!(
        digest(started(&t, start).await).await,
        PickV2::DEFINITION.digest
    );
}
