//! Start options and bulk starts on Postgres (issue 20): the run's queue and
//! priority kept on the run and used by workers; a start time on the pinned
//! clock; `start_many` in a constant number of round trips (counted by a
//! proxy that reads the protocol), all or none, in the caller's transaction
//! too; concurrent bulk starts with common keys start each key once.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, Error, RunStatus, StartOptions, Started, Worker};

use crate::pg::{TestDb, at_ms, t0};
use crate::start_in_pg::own_connection;
use crate::wire::WireCounter;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Parcel {
    id: i64,
}

struct Post;

/// `stamp` names its own queue; `pack` and `send` take the workflow's
/// (`post`) or the run's.
#[workflow(name = "starts.post", input = Parcel, queue = "post", priority = 4)]
impl Post {
    #[step]
    async fn pack(&self, _cx: &mut StepCx<Parcel>) {}

    #[step(queue = "stamps")]
    async fn stamp(&self, _cx: &mut StepCx<Parcel>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<Parcel>) {}
}

fn parcels(ids: impl IntoIterator<Item = i64>) -> Vec<(Parcel, StartOptions)> {
    ids.into_iter()
        .map(|id| (Parcel { id }, StartOptions::new()))
        .collect()
}

fn keyed(prefix: &str, ids: impl IntoIterator<Item = i64>) -> Vec<(Parcel, StartOptions)> {
    ids.into_iter()
        .map(|id| {
            (
                Parcel { id },
                StartOptions::new().key(format!("{prefix}-{id}")),
            )
        })
        .collect()
}

/// The round trips `work` makes through `proxy`.
async fn trips_of<T>(proxy: &WireCounter, work: impl Future<Output = T>) -> (usize, T) {
    let before = proxy.trips();
    let out = work.await;
    (proxy.trips() - before, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_many_takes_the_same_round_trips_for_three_runs_as_for_five_hundred() {
    let t = TestDb::new().await;
    let proxy = WireCounter::start();
    let db = Database::connect_with(&proxy.url(), t.db.schema().clone(), t.db.clock().clone())
        .await
        .expect("connect through the proxy");
    let client = db.client();
    // Warm: the pooled connection prepares (and caches) both statements.
    client
        .start_many::<Post>(keyed("warm", [0]))
        .await
        .expect("a bulk start");
    client
        .start_many::<Post>(keyed("warm", [0]))
        .await
        .expect("a bulk start");

    let (few, started) = trips_of(&proxy, client.start_many::<Post>(keyed("a", 0..3))).await;
    assert_eq!(started.expect("a bulk start").len(), 3);
    let (many, started) = trips_of(&proxy, client.start_many::<Post>(keyed("b", 0..500))).await;
    let started = started.expect("a bulk start");
    assert_eq!(started.len(), 500);
    assert!(started.iter().all(|s| s.created));
    assert_eq!(few, many, "the same round trips for 3 runs as for 500");
    // BEGIN, the insert, COMMIT.
    assert_eq!(many, 3);

    // Keys taken before: one more statement reads their runs, whatever
    // their number.
    let (few_taken, _) = trips_of(&proxy, client.start_many::<Post>(keyed("a", 0..3))).await;
    let (many_taken, again) = trips_of(&proxy, client.start_many::<Post>(keyed("b", 0..500))).await;
    let again = again.expect("a bulk start");
    assert!(again.iter().all(|s| !s.created));
    assert_eq!(
        again.iter().map(|s| s.run_id).collect::<Vec<_>>(),
        started.iter().map(|s| s.run_id).collect::<Vec<_>>()
    );
    assert_eq!((few_taken, many_taken), (4, 4));

    // Without keys too; and one by one, each start is a round trip of its
    // own (the counter sees them).
    let (plain, _) = trips_of(&proxy, client.start_many::<Post>(parcels(0..200))).await;
    assert_eq!(plain, 3);
    let (one_by_one, ()) = trips_of(&proxy, async {
        for id in 0..20 {
            client.start::<Post>(&Parcel { id }).await.expect("a start");
        }
    })
    .await;
    assert!(one_by_one >= 20, "{one_by_one}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_many_in_a_callers_transaction_is_one_statement_and_commits_with_it() {
    let t = TestDb::new().await;
    let client = t.client();
    let proxy = WireCounter::start();
    let config = pgbus_testkit::raw_config(&proxy.url()).expect("a URL");
    let mut app = pgbus_testkit::connect_raw(&config)
        .await
        .expect("connect through the proxy");
    // Learn the statements' parameter types once (on the pool, not here).
    let warm = app.transaction().await.expect("begin");
    client
        .start_many_in::<Post>(&warm, keyed("warm", [0]))
        .await
        .expect("a bulk start");
    warm.rollback().await.expect("rollback");

    let tx = app.transaction().await.expect("begin");
    let (trips, started) = trips_of(
        &proxy,
        client.start_many_in::<Post>(&tx, keyed("k", 0..300)),
    )
    .await;
    assert_eq!(started.expect("a bulk start").len(), 300);
    assert_eq!(trips, 1, "one statement on the caller's connection");
    tx.rollback().await.expect("rollback");
    let runs = t.count("SELECT count(*) FROM {schema}.runs", &[]).await;
    assert_eq!(runs, 0, "rolled back with the caller's transaction");

    let tx = app.transaction().await.expect("begin");
    let started = client
        .start_many_in::<Post>(&tx, keyed("k", [1, 2, 1]))
        .await
        .expect("a bulk start");
    tx.commit().await.expect("commit");
    assert_eq!(
        started.iter().map(|s| s.created).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(started[0].run_id, started[2].run_id);
    let runs = t.count("SELECT count(*) FROM {schema}.runs", &[]).await;
    assert_eq!(runs, 2);

    // A key committed before: read back in the same transaction.
    let tx = app.transaction().await.expect("begin");
    let (trips, again) = trips_of(
        &proxy,
        client.start_many_in::<Post>(&tx, keyed("k", [2, 3])),
    )
    .await;
    let again = again.expect("a bulk start");
    tx.commit().await.expect("commit");
    assert_eq!(trips, 2);
    assert_eq!(again[0], Started::new(started[1].run_id, false));
    assert!(again[1].created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bulk_starts_with_common_keys_start_each_key_once() {
    let t = TestDb::new().await;
    let other = t.second_connection().await;
    let (one, two) = (t.client(), other.client());
    for round in 0..4 {
        let prefix = format!("r{round}");
        let first = keyed(&prefix, 0..200);
        // The same keys in another order, and more.
        let second = keyed(&prefix, (100..300).rev());
        let (a, b) = tokio::join!(
            one.start_many::<Post>(first),
            two.start_many::<Post>(second)
        );
        let (a, b) = (a.expect("the first call"), b.expect("the second call"));
        for id in 100..200 {
            let in_a = a[usize::try_from(id).unwrap()];
            let in_b = b[usize::try_from(299 - id).unwrap()];
            assert_eq!(in_a.run_id, in_b.run_id, "key {id}: one run");
            assert!(in_a.created ^ in_b.created, "key {id}: created once");
        }
        let created = a.iter().chain(&b).filter(|s| s.created).count();
        assert_eq!(created, 300, "round {round}");
        let runs = t
            .count(
                "SELECT count(*) FROM {schema}.runs WHERE idempotency_key LIKE $1",
                &[&format!("{prefix}-%")],
            )
            .await;
        assert_eq!(runs, 300, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_queue_and_priority_are_kept_and_workers_follow_them() {
    let t = TestDb::new().await;
    let client = t.client();
    let started = client
        .start_with::<Post>(
            &Parcel { id: 1 },
            &StartOptions::new().queue("bulk").priority(-2),
        )
        .await
        .expect("a start");
    let kept = t
        .query(
            "SELECT queue_override, priority_override FROM {schema}.runs WHERE id = $1",
            &[&started.run_id.0],
        )
        .await;
    assert_eq!(kept[0].get::<_, Option<String>>(0).as_deref(), Some("bulk"));
    assert_eq!(kept[0].get::<_, Option<i16>>(1), Some(-2));

    // A worker on the workflow's queue does not take it; one on the run's
    // (and the step's own) runs it to the end.
    let on_post: Worker =
        t.db.worker()
            .register(Post)
            .queue("post")
            .queue("stamps")
            .build()
            .expect("a worker");
    assert_eq!(on_post.run_until_idle().await.expect("a run"), 0);
    let on_bulk: Worker =
        t.db.worker()
            .register(Post)
            .queue("bulk")
            .queue("stamps")
            .build()
            .expect("a worker");
    on_bulk.run_until_idle().await.expect("a run");
    let view = t.run(started.run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    let placed: Vec<(&str, &str, i16)> = view
        .steps
        .iter()
        .map(|s| (s.step_name.as_str(), s.queue.as_str(), s.priority))
        .collect();
    assert_eq!(
        placed,
        [
            ("pack", "bulk", -2),
            ("stamp", "stamps", -2),
            ("send", "bulk", -2)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_time_holds_the_first_step_until_then_on_the_pinned_clock() {
    let t = TestDb::new().await;
    let client = t.client();
    let at = at_ms(3_600_000);
    let timed = client
        .start_with::<Post>(&Parcel { id: 1 }, &StartOptions::new().at(at))
        .await
        .expect("a start");
    let delayed = client
        .start_with::<Post>(
            &Parcel { id: 2 },
            &StartOptions::new().delay(Duration::from_millis(1_500)),
        )
        .await
        .expect("a start");
    assert_eq!(t.run(timed.run_id).await.steps[0].scheduled_at, at);
    assert_eq!(
        t.run(delayed.run_id).await.steps[0].scheduled_at,
        at_ms(1_500)
    );
    let worker: Worker =
        t.db.worker()
            .register(Post)
            .queue("post")
            .queue("stamps")
            .build()
            .expect("a worker");
    assert_eq!(
        worker.run_until_idle().await.expect("a run"),
        0,
        "nothing due"
    );
    t.clock.advance(Duration::from_millis(1_500));
    worker.run_until_idle().await.expect("a run");
    assert_eq!(t.run(delayed.run_id).await.run.status, RunStatus::Finished);
    assert_eq!(t.run(timed.run_id).await.run.status, RunStatus::Ready);
    t.clock.advance(Duration::from_hours(1));
    worker.run_until_idle().await.expect("a run");
    assert_eq!(t.run(timed.run_id).await.run.status, RunStatus::Finished);
    assert!(t0() < at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_start_and_a_bulk_start_write_the_same_rows() {
    let t = TestDb::new().await;
    let client = t.client();
    let options = |key: &str| {
        StartOptions::new()
            .key(key)
            .delay(Duration::from_secs(90))
            .queue("bulk")
            .priority(7)
    };
    client
        .start_with::<Post>(&Parcel { id: 5 }, &options("single"))
        .await
        .expect("a start");
    client
        .start_many::<Post>([(Parcel { id: 5 }, options("bulk"))])
        .await
        .expect("a bulk start");
    let rows = t
        .query(
            "SELECT to_jsonb(r) - 'id' - 'idempotency_key', to_jsonb(s) - 'id' - 'run_id', \
                    to_jsonb(e) - 'id' - 'run_id' \
             FROM {schema}.runs r JOIN {schema}.steps s ON s.run_id = r.id \
             JOIN {schema}.events e ON e.run_id = r.id ORDER BY r.id",
            &[],
        )
        .await;
    assert_eq!(rows.len(), 2);
    for column in 0..3 {
        assert_eq!(
            rows[0].get::<_, serde_json::Value>(column),
            rows[1].get::<_, serde_json::Value>(column),
            "column {column}"
        );
    }
}

/// An input whose map keys are not strings: it does not serialize to JSON
/// when the map holds something.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Picky(std::collections::BTreeMap<Vec<u8>, u8>);

struct Sorts;

#[workflow(name = "starts.sorts", input = Picky)]
impl Sorts {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Picky>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_start_that_fails_to_serialize_starts_none_and_says_which() {
    let t = TestDb::new().await;
    let fine = Picky(std::collections::BTreeMap::new());
    let bad = Picky(std::collections::BTreeMap::from([(vec![1], 1)]));
    let inputs = [fine.clone(), fine.clone(), bad, fine];
    let error = t
        .client()
        .start_many::<Sorts>(inputs.iter().map(|i| (i, StartOptions::new())))
        .await
        .unwrap_err();
    match &error {
        Error::StartRefused { index: 2, source } => {
            assert!(matches!(**source, Error::Json(_)), "{source:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        format!("{error:?}").contains("start 2 of the start_many call"),
        "{error:?}"
    );
    let runs = t.count("SELECT count(*) FROM {schema}.runs", &[]).await;
    assert_eq!(runs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_starts_wake_each_queue_at_commit() {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let mut app = own_connection().await;
    let (_listening, mut notes) = crate::start_in_pg::listener(&t).await;
    let tx = app.transaction().await.expect("begin");
    client
        .start_many_in::<Post>(
            &tx,
            [
                (Parcel { id: 1 }, StartOptions::new().queue("east")),
                (Parcel { id: 2 }, StartOptions::new().queue("west")),
                (Parcel { id: 3 }, StartOptions::new().queue("east")),
            ],
        )
        .await
        .expect("a bulk start");
    assert!(notes.try_recv().is_err(), "nothing before commit");
    tx.commit().await.expect("commit");
    let mut queues = Vec::new();
    for _ in 0..2 {
        let note = tokio::time::timeout(Duration::from_secs(10), notes.recv())
            .await
            .expect("a notification within 10 s")
            .expect("a notification");
        queues.push(note);
    }
    queues.sort();
    assert_eq!(queues, ["east", "west"]);
}
