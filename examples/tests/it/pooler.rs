//! The README's order-fulfilment workflow (several steps, a signal, a fan_out)
//! through a private PgBouncer in transaction mode with two server
//! connections, so every client shares them (FAILURE-CLASSES 23): a worker
//! and a client in this process, and the example program as a user runs it.
//! Also shows the pooler really is one that breaks named statements, so the
//! tests would catch a statement that is not sent unnamed.

use std::time::Duration;

use pgbus_examples::{Fulfil, NotifyVendor, Order, Settlement};
use pgbus_runtime::{BatchStatus, Clock, Database, RunStatus};
use pgbus_testkit::TestDatabase;
use pgbus_testkit::pgbouncer::{self, PgBouncer};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// A plain tokio-postgres connection through the pooler.
async fn raw(bouncer: &PgBouncer) -> tokio_postgres::Client {
    let config = pgbus_testkit::raw_config(&bouncer.url("test")).expect("a URL");
    pgbus_testkit::connect_raw(&config)
        .await
        .expect("connect through pgbouncer")
}

/// Prepared statements on each of the pooler's two server connections: both
/// held at once by a transaction each, so the two answers come from both.
async fn prepared_on_servers(bouncer: &PgBouncer) -> Vec<(i32, i64)> {
    let (a, b) = (raw(bouncer).await, raw(bouncer).await);
    let mut found = Vec::new();
    for client in [&a, &b] {
        client.batch_execute("BEGIN").await.expect("begin");
        let row = client
            .query_typed_one(
                "SELECT pg_backend_pid(), (SELECT count(*) FROM pg_prepared_statements)",
                &[],
            )
            .await
            .expect("count");
        found.push((row.get(0), row.get(1)));
    }
    for client in [&a, &b] {
        client.batch_execute("COMMIT").await.expect("commit");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_statement_does_not_survive_its_transaction_behind_the_pooler() {
    let Some(bouncer) = pgbouncer::for_test(2) else {
        return;
    };
    let (holder, preparer, other) = (
        raw(&bouncer).await,
        raw(&bouncer).await,
        raw(&bouncer).await,
    );
    // `holder` keeps one server connection; the prepare gets the other.
    holder.batch_execute("BEGIN").await.expect("begin");
    holder
        .simple_query("SELECT 1")
        .await
        .expect("hold a server");
    let statement = preparer
        .prepare("SELECT 1 + $1::int")
        .await
        .expect("prepare");
    // `other` takes that one (the only free one), so the execute below can
    // only land on the server `holder` releases: not where it was prepared.
    other.batch_execute("BEGIN").await.expect("begin");
    other.simple_query("SELECT 1").await.expect("hold a server");
    let (executed, committed) = tokio::join!(
        preparer.query_one(&statement, &[&1_i32]),
        holder.batch_execute("COMMIT")
    );
    committed.expect("commit");
    let error = executed.expect_err("a named statement is gone on another server connection");
    assert_eq!(
        error.code(),
        Some(&SqlState::INVALID_SQL_STATEMENT_NAME),
        "{error:?}"
    );
    // The same statement sent unnamed, as pgbus does behind a pooler, works
    // wherever it lands.
    let row = preparer
        .query_typed_one("SELECT 1 + $1::int", &[(&1_i32, Type::INT4)])
        .await
        .expect("unnamed");
    assert_eq!(row.get::<_, i32>(0), 2);
    other.batch_execute("COMMIT").await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_workflow_runs_to_the_end_through_pgbouncer() {
    let Some(bouncer) = pgbouncer::for_test(2) else {
        return;
    };
    // The schema is made (and dropped) on a direct connection.
    let direct = TestDatabase::new().await.expect("a test schema");
    let db = Database::builder(&bouncer.url("test"))
        .schema(direct.db().schema().clone())
        .clock(Clock::Database)
        .transaction_pooler(true)
        .connect()
        .await
        .expect("connect through pgbouncer");
    db.migrate().await.expect("migrations through pgbouncer");
    let client = db.client();
    let mut runs = Vec::new();
    for id in 1..=3 {
        let order = Order {
            id,
            amount_cents: 500 * id,
            gift_wrap: id % 2 == 0,
        };
        let run = client.start::<Fulfil>(&order).await.expect("start").run_id;
        runs.push(run);
    }
    let keyed = client
        .start_idempotent::<Fulfil>(
            &Order {
                id: 1,
                amount_cents: 500,
                gift_wrap: false,
            },
            "order-1",
        )
        .await
        .expect("start");
    assert!(keyed.created);
    runs.push(keyed.run_id);
    for run in &runs {
        let settlement = Settlement {
            reference: format!("PAY-{run}"),
        };
        client
            .signal(*run, "payment.settled", &settlement)
            .await
            .expect("signal");
    }

    // No direct URL for LISTEN: the worker polls.
    let worker = db
        .worker()
        .register(Fulfil::new(1))
        .register(NotifyVendor)
        .concurrency(4)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("worker");
    let watcher = client.clone();
    let watched = runs.clone();
    let all_ended = async move {
        loop {
            let mut ended = true;
            for run in &watched {
                ended &= watcher
                    .run(*run)
                    .await
                    .is_ok_and(|view| view.run.status.is_terminal());
            }
            if ended {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // Boxed: the worker's loop and the wait together are a large future.
    tokio::time::timeout(
        Duration::from_mins(1),
        Box::pin(worker.run_until(all_ended)),
    )
    .await
    .expect("every run ends within a minute")
    .expect("the worker ran");

    for run in &runs {
        let view = client.run(*run).await.expect("read the run");
        assert_eq!(view.run.status, RunStatus::Finished, "{run}: {view:?}");
        assert_eq!(view.batches.len(), 1, "the vendors' fan_out");
        assert_ne!(
            view.batches[0].status,
            BatchStatus::Open,
            "the batch resolved"
        );
        assert!(view.signals.iter().all(|s| s.consumed_by.is_some()));
    }
    let listed = client
        .list_runs(&pgbus_runtime::RunFilter::default())
        .await
        .expect("list");
    assert!(listed.len() > runs.len(), "the child runs are listed too");

    let servers = prepared_on_servers(&bouncer).await;
    assert_ne!(servers[0].0, servers[1].0, "two server connections");
    assert!(
        servers.iter().all(|(_, prepared)| *prepared == 0),
        "nothing left prepared on the pooler's server connections: {servers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_program_runs_through_pgbouncer() {
    let Some(bouncer) = pgbouncer::for_test(3) else {
        return;
    };
    let direct = TestDatabase::new().await.expect("a test schema");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_order-fulfilment"))
        .env("DATABASE_URL", bouncer.url("test"))
        .env("PGBUS_SCHEMA", direct.db().schema().as_str())
        .env("PGBUS_TRANSACTION_POOLER", "true")
        // Its worker listens on a direct connection.
        .env("PGBUS_LISTEN_URL", pgbus_testkit::test_database_url())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the program starts");
    let pid = child.id();
    let waited = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(output) = waited else {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
        panic!("the program did not end within 90 s");
    };
    let output = output.expect("no panic").expect("the program ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("5 of 5 runs finished"), "{stdout}");
    let servers = prepared_on_servers(&bouncer).await;
    assert!(
        servers.iter().all(|(_, prepared)| *prepared == 0),
        "{servers:?}"
    );
}
