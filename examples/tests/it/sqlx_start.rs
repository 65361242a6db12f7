//! Starting runs in the caller's sqlx transaction (the `sqlx` feature of
//! pgbus-runtime, which this crate turns on): the run exists exactly when the
//! caller commits, the wake-up arrives only at commit, and keyed starts race
//! as they do outside a transaction (FAILURE-CLASSES 21).

use std::str::FromStr as _;
use std::time::Duration;

use pgbus_examples::{NotifyVendor, VendorNotice};
use pgbus_runtime::{Error, RunStatus};
use pgbus_testkit::TestDatabase;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};
use tokio_postgres::AsyncMessage;

/// The user pgbus logs in as: the URL's, else the testkit's one rule.
fn user() -> String {
    let config = pgbus_testkit::raw_config(&pgbus_testkit::test_database_url()).expect("a URL");
    config.get_user().expect("a user name").to_owned()
}

/// An application's own sqlx connection to the test database.
async fn sqlx_connection() -> PgConnection {
    let options = PgConnectOptions::from_str(&pgbus_testkit::test_database_url())
        .expect("a URL")
        .username(&user())
        .ssl_mode(PgSslMode::Disable);
    PgConnection::connect_with(&options).await.expect("connect")
}

/// A `LISTEN` session on the schema's channel; notifications come out of
/// the receiver.
async fn listener(
    channel: &str,
) -> (
    tokio_postgres::Client,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let config = pgbus_testkit::raw_config(&pgbus_testkit::test_database_url()).expect("a URL");
    let (client, mut connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    let (send, receive) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = futures_util::StreamExt::next(&mut messages).await {
            if let AsyncMessage::Notification(n) = message {
                let _ = send.send(n.payload().to_owned());
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await
        .expect("listen");
    (client, receive)
}

fn notice(order_id: i64) -> VendorNotice {
    VendorNotice {
        order_id,
        vendor: "acme".to_owned(),
    }
}

async fn runs(test_db: &TestDatabase) -> i64 {
    let client = test_db.db().pool().get().await.expect("a connection");
    client
        .query_one(
            &format!(
                "SELECT (SELECT count(*) FROM \"{0}\".runs) + (SELECT count(*) FROM \"{0}\".steps) \
                 + (SELECT count(*) FROM \"{0}\".events)",
                test_db.db().schema()
            ),
            &[],
        )
        .await
        .expect("count")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_in_a_sqlx_transaction_exists_exactly_when_it_commits() {
    let test_db = TestDatabase::new().await.expect("a test schema");
    let db = test_db.db();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // Polls once a minute: a run finished within seconds was woken by the
    // commit's notification.
    let worker = db
        .worker()
        .register(NotifyVendor)
        .poll_interval(Duration::from_mins(1))
        .build()
        .expect("worker");
    let running = tokio::spawn(async move {
        worker
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });
    let (listening, mut notes) = listener(&db.schema().channel()).await;
    let client = db.client();
    let mut app = sqlx_connection().await;

    let mut tx = app.begin().await.expect("begin");
    let gone = client
        .start_in_sqlx::<NotifyVendor>(&mut tx, &notice(1))
        .await
        .expect("start in the transaction")
        .run_id;
    tx.rollback().await.expect("rollback");
    assert_eq!(runs(&test_db).await, 0, "nothing of a rolled-back start");
    assert!(matches!(
        client.run(gone).await,
        Err(Error::RunNotFound { .. })
    ));

    let mut tx = app.begin().await.expect("begin");
    let run_id = client
        .start_in_sqlx::<NotifyVendor>(&mut tx, &notice(2))
        .await
        .expect("start in the transaction")
        .run_id;
    listening
        .simple_query("SELECT 1")
        .await
        .expect("round trip");
    assert!(notes.try_recv().is_err(), "no wake-up before commit");
    assert_eq!(runs(&test_db).await, 0, "invisible before commit");
    tx.commit().await.expect("commit");
    let woken = tokio::time::timeout(Duration::from_secs(5), notes.recv())
        .await
        .expect("a wake-up after commit");
    assert!(woken.is_some());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = client.run(run_id).await.expect("the run").run.status;
        if status == RunStatus::Finished {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker finished the committed run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let prepared: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(&mut app)
        .await
        .expect("count");
    assert_eq!(
        prepared, 0,
        "nothing left prepared on the caller's connection"
    );
    stop.send(()).expect("the worker runs");
    running.await.expect("no panic").expect("the worker ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_keyed_sqlx_starts_behave_as_outside_a_transaction() {
    let test_db = TestDatabase::new().await.expect("a test schema");
    let client = test_db.db().client();
    for (key, first_commits) in [("rolls-back", false), ("commits", true)] {
        let mut first = sqlx_connection().await;
        let mut second = sqlx_connection().await;
        let second_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut second)
            .await
            .expect("pid");
        let mut tx1 = first.begin().await.expect("begin");
        let one = client
            .start_idempotent_in_sqlx::<NotifyVendor>(&mut tx1, &notice(1), key)
            .await
            .expect("first start");
        assert!(one.created);
        let racing = client.clone();
        let key_owned = key.to_owned();
        let waiter = tokio::spawn(async move {
            let mut tx2 = second.begin().await.expect("begin");
            let two = racing
                .start_idempotent_in_sqlx::<NotifyVendor>(&mut tx2, &notice(2), &key_owned)
                .await;
            tx2.commit().await.expect("commit");
            two
        });
        // The second start waits on the first one's key.
        let pool = test_db.db().pool().get().await.expect("a connection");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let waiting: i64 = pool
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                    &[&second_pid],
                )
                .await
                .expect("count")
                .get(0);
            if waiting > 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the second start waits"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if first_commits {
            tx1.commit().await.expect("commit");
        } else {
            tx1.rollback().await.expect("rollback");
        }
        let two = waiter.await.expect("no panic").expect("second start");
        if first_commits {
            assert_eq!((two.run_id, two.created), (one.run_id, false));
        } else {
            assert!(two.created, "the key was free again");
            let view = client.run(two.run_id).await.expect("the run");
            assert_eq!(view.input, serde_json::to_value(notice(2)).expect("json"));
        }
    }
    let client_rows = client
        .list_runs(&pgbus_runtime::RunFilter::default())
        .await
        .expect("list");
    assert_eq!(client_rows.len(), 2, "one run per key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatable_read_sqlx_caller_gets_a_typed_conflict() {
    let test_db = TestDatabase::new().await.expect("a test schema");
    let client = test_db.db().client();
    let mut app = sqlx_connection().await;
    let mut tx = app.begin().await.expect("begin");
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .expect("repeatable read");
    sqlx::query("SELECT 1")
        .execute(&mut *tx)
        .await
        .expect("take the snapshot");
    let later = client
        .start_idempotent::<NotifyVendor>(&notice(3), "after")
        .await
        .expect("start");
    let conflict = client
        .start_idempotent_in_sqlx::<NotifyVendor>(&mut tx, &notice(3), "after")
        .await;
    assert!(
        matches!(&conflict, Err(Error::StartConflict { .. })),
        "{conflict:?}"
    );
    tx.rollback().await.expect("rollback");
    let mut tx = app.begin().await.expect("begin");
    let retried = client
        .start_idempotent_in_sqlx::<NotifyVendor>(&mut tx, &notice(3), "after")
        .await
        .expect("start");
    assert_eq!((retried.run_id, retried.created), (later.run_id, false));
    tx.commit().await.expect("commit");
}

/// Start options and bulk starts on a caller's sqlx connection (issue 20):
/// `start_with_in_sqlx` keeps the run's queue and delay; `start_many_in_sqlx`
/// starts every run of the call, in order, with keys as single starts, and
/// only when the caller commits; nothing is left prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_options_and_bulk_starts_in_a_sqlx_transaction() {
    use pgbus_runtime::StartOptions;

    let test_db = TestDatabase::new().await.expect("a test schema");
    let client = test_db.db().client();
    let mut app = sqlx_connection().await;

    let mut tx = app.begin().await.expect("begin");
    let one = client
        .start_with_in_sqlx::<NotifyVendor>(
            &mut tx,
            &notice(1),
            &StartOptions::new()
                .key("one")
                .delay(Duration::from_hours(1))
                .queue("sqlx_bulk"),
        )
        .await
        .expect("a start");
    let bulk = client
        .start_many_in_sqlx::<NotifyVendor>(
            &mut tx,
            [
                (notice(2), StartOptions::new().key("two")),
                (notice(3), StartOptions::new()),
                (notice(4), StartOptions::new().key("one")),
                (notice(5), StartOptions::new().key("two")),
            ],
        )
        .await
        .expect("a bulk start");
    tx.commit().await.expect("commit");
    assert!(one.created);
    assert_eq!(
        bulk.iter().map(|s| s.created).collect::<Vec<_>>(),
        [true, true, false, false]
    );
    assert_eq!(bulk[2].run_id, one.run_id);
    assert_eq!(bulk[3].run_id, bulk[0].run_id);
    let view = client.run(one.run_id).await.expect("the run");
    assert_eq!(view.steps[0].queue, "sqlx_bulk");
    assert!(view.steps[0].scheduled_at > view.run.created_at + chrono::Duration::minutes(59));

    let mut tx = app.begin().await.expect("begin");
    client
        .start_many_in_sqlx::<NotifyVendor>(
            &mut tx,
            (6..9).map(|i| (notice(i), StartOptions::new())),
        )
        .await
        .expect("a bulk start");
    tx.rollback().await.expect("rollback");
    let listed = client
        .list_runs(&pgbus_runtime::RunFilter::new())
        .await
        .expect("a list");
    assert_eq!(listed.len(), 3, "the rolled-back call left nothing");

    let prepared: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(&mut app)
        .await
        .expect("count");
    assert_eq!(
        prepared, 0,
        "nothing left prepared on the caller's connection"
    );
}
