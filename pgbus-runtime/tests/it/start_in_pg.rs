//! Starting runs in the caller's own transaction (tokio-postgres): the run
//! exists exactly when the caller commits, the wake-up arrives only at commit,
//! and idempotent starts race as they do outside a transaction
//! (FAILURE-CLASSES 18, 21).

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus, Started, Worker};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, IsolationLevel};

use crate::pg::{TestDb, database_url, eventually};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Order {
    pub(crate) id: i64,
}

pub(crate) struct Ship;

#[workflow(name = "start_in.ship", input = Order)]
impl Ship {
    #[step]
    async fn pack(&self, _cx: &mut StepCx<Order>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<Order>) {}
}

/// The test database's URL as a `tokio_postgres` config, as the user pgbus
/// logs in as where the URL names none.
fn own_config() -> tokio_postgres::Config {
    pgbus_testkit::raw_config(&database_url()).expect("a URL")
}

/// A connection of its own, not from any pool, as an application has.
pub(crate) async fn own_connection() -> tokio_postgres::Client {
    pgbus_testkit::connect_raw(&own_config())
        .await
        .expect("connect")
}

/// A `LISTEN` session on the schema's channel; notifications come out of the
/// receiver.
pub(crate) async fn listener(
    t: &TestDb,
) -> (tokio_postgres::Client, mpsc::UnboundedReceiver<String>) {
    let (client, mut connection) = own_config()
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    let (send, receive) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = futures_util::StreamExt::next(&mut messages).await {
            if let AsyncMessage::Notification(n) = message {
                let _ = send.send(n.payload().to_owned());
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN \"pgbus_{}\"", t.schema()))
        .await
        .expect("listen");
    (client, receive)
}

/// A worker whose poll interval is a minute, running until the guard drops:
/// a run it finishes within seconds was woken by a notification.
pub(crate) struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub(crate) async fn run_worker(t: &TestDb) -> Running {
    let worker: Worker =
        t.db.worker()
            .register(Ship)
            .poll_interval(Duration::from_mins(1))
            .build()
            .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        worker
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });
    assert!(t.worker_listens().await, "the worker listens");
    Running { stop: Some(stop) }
}

pub(crate) async fn rows(t: &TestDb) -> (i64, i64, i64) {
    (
        t.count("SELECT count(*) FROM {schema}.runs", &[]).await,
        t.count("SELECT count(*) FROM {schema}.steps", &[]).await,
        t.count("SELECT count(*) FROM {schema}.events", &[]).await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_in_a_transaction_exists_exactly_when_it_commits() {
    let t = TestDb::on_database_clock().await;
    let _worker = run_worker(&t).await;
    let (listening, mut notes) = listener(&t).await;
    let client = t.client();
    let mut app = own_connection().await;

    // Rolled back: nothing of the run, no wake-up, nothing for the worker.
    let tx = app.transaction().await.expect("begin");
    let gone = client
        .start_in::<Ship>(&tx, &Order { id: 1 })
        .await
        .expect("start in the transaction")
        .run_id;
    assert_eq!(rows(&t).await, (0, 0, 0), "invisible before commit");
    tx.rollback().await.expect("rollback");
    assert_eq!(rows(&t).await, (0, 0, 0), "nothing after rollback");
    let missing = client.run(gone).await;
    assert!(
        matches!(missing, Err(Error::RunNotFound { .. })),
        "{missing:?}"
    );

    // Committed: the wake-up waits for the commit, then the worker runs it.
    let tx = app.transaction().await.expect("begin");
    tx.execute("SELECT 1", &[])
        .await
        .expect("the caller's own work");
    let run_id = client
        .start_in::<Ship>(&tx, &Order { id: 2 })
        .await
        .expect("start in the transaction")
        .run_id;
    // A round trip on the listening session: a notification sent by now
    // would have come before its answer.
    listening
        .simple_query("SELECT 1")
        .await
        .expect("round trip");
    assert!(notes.try_recv().is_err(), "no wake-up before commit");
    assert_eq!(rows(&t).await, (0, 0, 0), "invisible before commit");
    tx.commit().await.expect("commit");
    let woken = tokio::time::timeout(Duration::from_secs(5), notes.recv())
        .await
        .expect("a wake-up after commit");
    assert_eq!(woken.as_deref(), Some("default"));
    let finished = eventually(Duration::from_secs(10), || async {
        t.run(run_id).await.run.status == RunStatus::Finished
    })
    .await;
    assert!(
        finished,
        "the worker finished the committed run, woken at commit"
    );
    assert_eq!(rows(&t).await.0, 1, "only the committed run exists");

    // Nothing was left prepared on the caller's connection (asked unnamed,
    // so the question is not itself a prepared statement).
    let prepared: i64 = app
        .query_typed_one("SELECT count(*) FROM pg_prepared_statements", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(prepared, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_transaction_and_a_plain_client_start_runs_too() {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let mut pooled = t.db.pool().get().await.expect("a connection");
    let tx = pooled.transaction().await.expect("begin");
    let in_tx = client
        .start_in::<Ship>(&*tx, &Order { id: 3 })
        .await
        .expect("start")
        .run_id;
    tx.commit().await.expect("commit");
    assert_eq!(t.run(in_tx).await.run.status, RunStatus::Ready);

    // A plain client commits the start on its own, as `start` does.
    let app = own_connection().await;
    let alone = client
        .start_idempotent_in::<Ship>(&app, &Order { id: 4 }, "alone")
        .await
        .expect("start");
    assert!(alone.created);
    let again = client
        .start_idempotent::<Ship>(&Order { id: 4 }, "alone")
        .await
        .expect("start");
    assert_eq!(again.run_id, alone.run_id);
    assert!(!again.created);
}

/// Waits until some backend waits on a lock (the second start, blocked on
/// the first one's key).
async fn someone_waits_on_a_lock(t: &TestDb, pid: i32) -> bool {
    eventually(Duration::from_secs(5), || async {
        t.count(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
            &[&pid],
        )
        .await
            > 0
    })
    .await
}

/// Two connections of their own for a race, and the second one's backend
/// pid (to see it wait on a lock).
async fn racing_connections() -> (tokio_postgres::Client, tokio_postgres::Client, i32) {
    let first = own_connection().await;
    let second = own_connection().await;
    let second_pid: i32 = second
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    (first, second, second_pid)
}

/// Starts `order` under `key` in a transaction of `connection`'s, in a task
/// of its own (it may wait on another transaction's key), and commits it; the
/// start's result.
fn race_second_start(
    client: &pgbus_runtime::Client,
    mut connection: tokio_postgres::Client,
    order: Order,
    key: &'static str,
) -> tokio::task::JoinHandle<Result<Started, Error>> {
    let racing = client.clone();
    tokio::spawn(async move {
        let tx2 = connection.transaction().await.expect("begin");
        let two = racing.start_idempotent_in::<Ship>(&tx2, &order, key).await;
        tx2.commit().await.expect("commit");
        two
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_keyed_starts_one_rolling_back_leave_the_others_run() {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let (mut first, second, second_pid) = racing_connections().await;

    let tx1 = first.transaction().await.expect("begin");
    let one = client
        .start_idempotent_in::<Ship>(&tx1, &Order { id: 5 }, "race")
        .await
        .expect("first start");
    assert!(one.created);

    let waiter = race_second_start(&client, second, Order { id: 6 }, "race");
    assert!(
        someone_waits_on_a_lock(&t, second_pid).await,
        "the second start waits for the first transaction"
    );
    tx1.rollback().await.expect("rollback");
    let two = waiter.await.expect("no panic").expect("second start");
    assert!(
        two.created,
        "the key was free again: the second start created"
    );
    assert_ne!(two.run_id, one.run_id);
    let view = t.run(two.run_id).await;
    assert_eq!(view.input, serde_json::json!({ "id": 6 }));
    assert_eq!(rows(&t).await.0, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_keyed_starts_both_committing_make_one_run() {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let (mut first, second, second_pid) = racing_connections().await;

    let tx1 = first.transaction().await.expect("begin");
    let one = client
        .start_idempotent_in::<Ship>(&tx1, &Order { id: 7 }, "both")
        .await
        .expect("first start");
    let waiter = race_second_start(&client, second, Order { id: 8 }, "both");
    assert!(someone_waits_on_a_lock(&t, second_pid).await);
    tx1.commit().await.expect("commit");
    let two = waiter.await.expect("no panic").expect("second start");
    assert_eq!(two.run_id, one.run_id);
    assert!(one.created);
    assert!(!two.created);
    assert_eq!(rows(&t).await.0, 1);
}

/// A `REPEATABLE READ` transaction on `app`.
async fn repeatable_read(app: &mut tokio_postgres::Client) -> tokio_postgres::Transaction<'_> {
    app.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await
        .expect("begin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatable_read_caller_gets_the_run_or_a_typed_conflict() {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let mut app = own_connection().await;

    // A key committed before the snapshot: the run comes back.
    let earlier = client
        .start_idempotent::<Ship>(&Order { id: 9 }, "before")
        .await
        .expect("start");
    let tx = repeatable_read(&mut app).await;
    let seen = client
        .start_idempotent_in::<Ship>(&tx, &Order { id: 9 }, "before")
        .await
        .expect("start");
    assert_eq!((seen.run_id, seen.created), (earlier.run_id, false));
    // Its snapshot is taken now; another start commits the key after it.
    let later = client
        .start_idempotent::<Ship>(&Order { id: 10 }, "after")
        .await
        .expect("start");
    let conflict = client
        .start_idempotent_in::<Ship>(&tx, &Order { id: 10 }, "after")
        .await;
    assert!(
        matches!(&conflict, Err(Error::StartConflict { workflow }) if workflow == "start_in.ship"),
        "{conflict:?}"
    );
    // A serialization conflict: retrying the transaction is the answer.
    assert!(conflict.as_ref().is_err_and(Error::is_transient));
    tx.rollback().await.expect("rollback");

    // Retried, the transaction sees that run.
    let tx = repeatable_read(&mut app).await;
    let retried = client
        .start_idempotent_in::<Ship>(&tx, &Order { id: 10 }, "after")
        .await
        .expect("start");
    assert_eq!((retried.run_id, retried.created), (later.run_id, false));
    tx.commit().await.expect("commit");
    assert_eq!(rows(&t).await.0, 2);
}
