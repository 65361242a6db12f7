//! Group commit at its edges against the real server: a member whose run
//! another transaction holds, one whose step holds a flow slot, one the
//! server refuses, unnamed statements (a transaction-mode pooler's), and a
//! group whose answers are lost after it committed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use futures_util::future::join_all;

use super::*;

fn url() -> String {
    std::env::var("PGBUS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned())
}

fn sql(db: &Database, text: &str) -> String {
    text.replace("{schema}", &format!("\"{}\"", db.schema()))
}

async fn one_i64(db: &Database, text: &str) -> i64 {
    let client = db.pool().get().await.expect("connection");
    client
        .query_one(&sql(db, text), &[])
        .await
        .expect("query")
        .get(0)
}

/// Starts `n` runs of `Once` and claims their first steps for `w1`, sorted
/// by run id.
pub(super) async fn claim_n(db: &Database, n: usize) -> Vec<Claim> {
    let client = db.client();
    for _ in 0..n {
        client.start::<Once>(&()).await.expect("start");
    }
    let mut claims = db
        .store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            i64::try_from(n).expect("small"),
            "w1",
            60_000,
        )
        .await
        .expect("claim");
    assert_eq!(claims.len(), n);
    claims.sort_by_key(|c| c.run_id.0);
    claims
}

/// A connection of the pool inside an open transaction that holds a row
/// lock (`lock`, a `SELECT ... FOR UPDATE`).
async fn hold(db: &Database, lock: &str, id: i64) -> deadpool_postgres::Object {
    let client = db.pool().get().await.expect("connection");
    client.batch_execute("BEGIN").await.expect("begin");
    client
        .query(&sql(db, lock), &[&id])
        .await
        .expect("lock the row");
    client
}

async fn until(db: &Database, what: &str, text: &str) {
    for _ in 0..500 {
        if one_i64(db, text).await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn ok() -> AttemptResult {
    AttemptResult::ok(Verb::Complete, None)
}

/// How many transactions wrote the ended first steps.
async fn ending_transactions(db: &Database) -> i64 {
    one_i64(
        db,
        "SELECT count(DISTINCT xmin::text) FROM {schema}.steps
         WHERE step_name = 'only' AND status <> 'in_progress'",
    )
    .await
}

/// A group never waits for a lock: the member whose run another
/// transaction holds ends alone, waiting for its own run only, and the
/// others of its group are written without it.
#[tokio::test]
async fn a_member_whose_run_is_held_ends_alone_and_holds_up_no_other() {
    let db = super::database().await;
    let claims = claim_n(&db, 3).await;
    let blocker = hold(
        &db,
        "SELECT 1 FROM {schema}.runs WHERE id = $1 FOR UPDATE",
        claims[1].run_id.0,
    )
    .await;
    let done = ok();
    let mut ends: Vec<_> = claims
        .iter()
        .map(|c| {
            Box::pin(
                db.store
                    .end_attempt(Once::DEFINITION, c, "w1", &done, false, None),
            )
        })
        .collect();
    let mut cx = Context::from_waker(Waker::noop());
    for end in &mut ends {
        assert!(end.as_mut().poll(&mut cx).is_pending());
    }
    let mut held = ends.remove(1);
    for end in ends {
        assert!(matches!(end.await.expect("end"), Ended::Applied(_)));
    }
    // Still held: the others are in, its own is not.
    assert_eq!(ending_transactions(&db).await, 1);
    assert!(held.as_mut().poll(&mut cx).is_pending());
    blocker.batch_execute("COMMIT").await.expect("release");
    assert!(matches!(held.await.expect("end"), Ended::Applied(_)));
    assert_eq!(ending_transactions(&db).await, 2);
    drop(blocker);
    drop_schema(&db).await;
}

/// A member whose run the group did not lock (held elsewhere here; a
/// fan-out child or a run not `performing` alike) is answered as soon as
/// the runs are locked, and ends alone while the group is still writing.
// One thread: both outcomes are handed over before the group's task first
// runs, so they are one group.
#[tokio::test(flavor = "current_thread")]
async fn a_member_whose_run_was_not_locked_does_not_wait_for_its_group() {
    // Its own application name: the sessions it waits for are told apart
    // by it (a statement's text in `pg_stat_activity` is cut short).
    let app = format!("grp_{}", uuid::Uuid::new_v4().simple());
    let db = Database::connect_with(
        &format!("{}?application_name={app}", url()),
        Schema::new(&format!("t_{}", uuid::Uuid::new_v4().simple())).expect("valid"),
        Clock::Database,
    )
    .await
    .expect("connect");
    db.migrate().await.expect("migrate");
    let claims = claim_n(&db, 2).await;
    // The group's write waits on the first member's step row; the second
    // member's run is held, so the group does not lock it.
    let step_held = hold(
        &db,
        "SELECT 1 FROM {schema}.steps WHERE id = $1 FOR UPDATE",
        claims[0].step_id,
    )
    .await;
    let run_held = hold(
        &db,
        "SELECT 1 FROM {schema}.runs WHERE id = $1 FOR UPDATE",
        claims[1].run_id.0,
    )
    .await;
    let ends: Vec<_> = claims
        .iter()
        .cloned()
        .map(|c| {
            let store = db.store.clone();
            tokio::spawn(async move {
                store
                    .end_attempt(Once::DEFINITION, &c, "w1", &ok(), false, None)
                    .await
            })
        })
        .collect();
    // Both wait on a lock: the group's write on the step row, and the
    // second member, already alone, on its run.
    until(
        &db,
        "the group and the second member wait on locks",
        &format!(
            "SELECT (count(*) >= 2)::int::bigint FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND application_name = '{app}'"
        ),
    )
    .await;
    run_held
        .batch_execute("COMMIT")
        .await
        .expect("release the run");
    let mut ends = ends.into_iter();
    let (first, second) = (ends.next().expect("first"), ends.next().expect("second"));
    // Ends while the group still waits (a bound for a failure, not a time
    // measured).
    let second = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the second member ends before its group")
        .expect("no panic")
        .expect("end");
    assert!(matches!(second, Ended::Applied(_)));
    assert!(!first.is_finished(), "the group still waits");
    step_held
        .batch_execute("COMMIT")
        .await
        .expect("release the step");
    let first = first.await.expect("no panic").expect("end");
    assert!(matches!(first, Ended::Applied(_)));
    assert_eq!(ending_transactions(&db).await, 2);
    drop((step_held, run_held));
    drop_schema(&db).await;
}

/// A step holding a flow slot gives it back through a trigger that takes
/// the slot's advisory locks: such a member ends alone, and its slot is
/// given back as without groups.
#[tokio::test]
async fn a_member_holding_a_flow_slot_ends_alone() {
    let db = super::database().await;
    let claims = claim_n(&db, 3).await;
    db.pool()
        .get()
        .await
        .expect("connection")
        .execute(
            &sql(
                &db,
                "UPDATE {schema}.steps SET slot_queue = 'queue:default' WHERE id = $1",
            ),
            &[&claims[0].step_id],
        )
        .await
        .expect("a slot");
    let done = ok();
    let ended = join_all(claims.iter().map(|c| {
        db.store
            .end_attempt(Once::DEFINITION, c, "w1", &done, false, None)
    }))
    .await;
    for e in ended {
        assert!(matches!(e.expect("end"), Ended::Applied(_)));
    }
    assert_eq!(ending_transactions(&db).await, 2, "the slot's member alone");
    assert_eq!(
        one_i64(
            &db,
            "SELECT count(*) FROM {schema}.steps
             WHERE status = 'in_progress' AND slot_queue IS NOT NULL"
        )
        .await,
        0
    );
    drop_schema(&db).await;
}

/// Groups with unnamed statements (a transaction-mode pooler's mode).
#[tokio::test]
async fn a_group_with_unnamed_statements_is_written_as_with_cached_ones() {
    let mut db = super::database().await;
    db.store.prep =
        crate::pg::statement::Preparer::new(crate::pg::statement::StatementMode::Unnamed);
    let claims = claim_n(&db, 5).await;
    let queues = ["default".to_owned()];
    let done = ok();
    let ended = join_all(claims.iter().map(|c| {
        db.store.end_attempt(
            Once::DEFINITION,
            c,
            "w1",
            &done,
            false,
            Some(Handoff {
                queues: &queues,
                stall_threshold_ms: 60_000,
            }),
        )
    }))
    .await;
    for e in ended {
        assert!(matches!(e.expect("end"), Ended::Continued(..)));
    }
    assert_eq!(
        one_i64(
            &db,
            "SELECT count(DISTINCT xmin::text) FROM {schema}.steps WHERE step_name = 'only'"
        )
        .await,
        1
    );
    drop_schema(&db).await;
}

/// A member whose outcome the server refuses fails its group; the others
/// then end alone and are applied, and only it fails.
#[tokio::test]
async fn a_member_the_server_refuses_fails_alone() {
    let db = super::database().await;
    let claims = claim_n(&db, 3).await;
    let refused = AttemptResult::ok(Verb::Complete, Some(serde_json::json!("nul \u{0} byte")));
    let done = ok();
    let results = [&done, &refused, &done];
    let ended = join_all(claims.iter().zip(results).map(|(c, r)| {
        db.store
            .end_attempt(Once::DEFINITION, c, "w1", r, false, None)
    }))
    .await;
    assert!(matches!(ended[0], Ok(Ended::Applied(_))), "{:?}", ended[0]);
    assert!(ended[1].is_err(), "{:?}", ended[1]);
    assert!(matches!(ended[2], Ok(Ended::Applied(_))), "{:?}", ended[2]);
    drop_schema(&db).await;
}

/// A store's outcome whose group committed, and whose answers (the
/// statement's and `COMMIT`'s) were both lost with the connection, must end
/// as an outcome retried after a lost reply: applied, no late completion
/// recorded, and a step handed on to the worker put back in its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_committed_and_lost_both_answers_is_not_a_late_completion() {
    let db = super::database().await;
    let claim = claim_n(&db, 1).await.remove(0);
    let proxy = Proxy::start();
    let app = format!("grp_{}", uuid::Uuid::new_v4().simple());
    let via = Database::connect_with(&proxy.url(&app), db.schema().clone(), db.clock().clone())
        .await
        .expect("connect through the proxy");
    assert!(via.store.groups.is_some(), "group commit is on by default");

    // Holds the member's step row, so the group waits inside end_group.sql.
    let blocker = hold(
        &db,
        "SELECT 1 FROM {schema}.steps WHERE id = $1 FOR UPDATE",
        claim.step_id,
    )
    .await;
    let store = via.store.clone();
    let c = claim.clone();
    let ending = tokio::spawn(async move {
        let queues = vec!["default".to_owned()];
        store
            .end_attempt(
                Once::DEFINITION,
                &c,
                "w1",
                &ok(),
                false,
                Some(Handoff {
                    queues: &queues,
                    stall_threshold_ms: 60_000,
                }),
            )
            .await
    });
    until(
        &db,
        "the group waits on the step row",
        &format!(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = '{app}' AND wait_event_type = 'Lock'"
        ),
    )
    .await;
    // From here the server's answers on that connection are lost.
    proxy.mute();
    blocker.batch_execute("COMMIT").await.expect("release");
    until(
        &db,
        "the group committed",
        &format!(
            "SELECT count(*) FROM {{schema}}.steps WHERE id = {} AND status = 'completed'",
            claim.step_id
        ),
    )
    .await;
    until(
        &db,
        "the group's session is idle",
        &format!(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = '{app}' AND state = 'idle'"
        ),
    )
    .await;
    // The connection breaks with both answers unread.
    proxy.cut_muted();
    let ended = tokio::time::timeout(Duration::from_secs(20), ending)
        .await
        .expect("the outcome ends")
        .expect("no panic")
        .expect("end");
    let late = late_events(&db.store, claim.run_id).await;
    let then = one_i64(
        &db,
        &format!(
            "SELECT count(*) FROM {{schema}}.steps
             WHERE run_id = {} AND step_name = 'then' AND status = 'in_progress'",
            claim.run_id.0
        ),
    )
    .await;
    assert!(
        matches!(ended, Ended::Applied(_)) && late == 0 && then == 0,
        "ended {ended:?}, late_completion_ignored events {late}, \
         handed step still in progress under w1: {then}"
    );
    drop(via);
    drop_schema(&db).await;
}

/// The proxy's accepted connections, each with whether it is muted.
type Open = Arc<Mutex<Vec<(TcpStream, Arc<AtomicBool>)>>>;

/// A TCP proxy whose open connections can be made to lose every answer
/// from the server, and then be broken; new connections pass as usual.
struct Proxy {
    port: u16,
    open: Open,
}

impl Proxy {
    fn start() -> Self {
        let config: tokio_postgres::Config = url().parse().expect("a test URL");
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream = format!("{host}:{port}");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let open: Open = Arc::default();
        let accepted = Arc::clone(&open);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let muted = Arc::new(AtomicBool::new(false));
                let (mut from, mut to) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Both);
                });
                let (mut from, mut to) = (
                    server.try_clone().expect("clone"),
                    client.try_clone().expect("clone"),
                );
                let lost = Arc::clone(&muted);
                std::thread::spawn(move || {
                    let mut buf = [0_u8; 8192];
                    loop {
                        match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if !lost.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err()
                                {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
                accepted.lock().expect("lock").push((client, muted));
            }
        });
        Self { port, open }
    }

    fn url(&self, application_name: &str) -> String {
        let config: tokio_postgres::Config = url().parse().expect("a test URL");
        let mut out = format!(
            "host=127.0.0.1 port={} dbname={} application_name={application_name}",
            self.port,
            config.get_dbname().unwrap_or("postgres")
        );
        if let Some(user) = config.get_user() {
            out.push_str(" user=");
            out.push_str(user);
        }
        out
    }

    /// Every connection open now loses the server's answers from here on.
    fn mute(&self) {
        for (_, muted) in self.open.lock().expect("lock").iter() {
            muted.store(true, Ordering::SeqCst);
        }
    }

    /// Breaks the connections that lose their answers.
    fn cut_muted(&self) {
        for (client, muted) in self.open.lock().expect("lock").iter() {
            if muted.load(Ordering::SeqCst) {
                let _ = client.shutdown(Shutdown::Both);
            }
        }
    }
}
