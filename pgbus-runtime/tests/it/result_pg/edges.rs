//! Waits for results at their edges (a review of issue 20): many clients of
//! one database, waits given up at any point, a run deleted while waited on.

use futures_util::FutureExt as _;
use pgbus_runtime::Error;

use super::{BOUND, Gate, NEVER, listening};
use crate::pg::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_one_database_share_one_listen_connection() {
    let t = TestDb::new().await;
    let mut runs = Vec::new();
    let mut waits = Vec::new();
    // A client per request, as a web handler might make one.
    for _ in 0..20 {
        let client = t.client();
        let run = client.start::<Gate>(&()).await.expect("a start").run_id;
        runs.push(run);
        waits.push(tokio::spawn(
            client
                .result::<Gate>(run)
                .poll_interval(NEVER)
                .into_future(),
        ));
    }
    assert!(
        listening(&t, 1).await,
        "one LISTEN connection for the waits of one database, however many clients"
    );
    let client = t.client();
    for run in runs {
        client.cancel(run, "ops", "done").await.expect("a cancel");
    }
    for waiting in waits {
        let ended = tokio::time::timeout(BOUND, waiting)
            .await
            .expect("woken")
            .expect("the wait's task");
        assert!(
            matches!(ended, Err(Error::RunCancelled { .. })),
            "{ended:?}"
        );
    }
    assert!(listening(&t, 0).await, "closed with the last wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waits_given_up_at_any_point_leave_no_session_and_the_next_is_woken() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    for round in 0..40_usize {
        let waits: Vec<_> = (0..8)
            .map(|_| {
                tokio::spawn(
                    client
                        .result::<Gate>(run)
                        .poll_interval(NEVER)
                        .into_future(),
                )
            })
            .collect();
        // Give up after a varying number of scheduler turns: before the
        // first read, during it, while the session connects, while parked.
        for _ in 0..round % 10 {
            tokio::task::yield_now().await;
        }
        if round % 4 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        for waiting in &waits {
            waiting.abort();
        }
        for waiting in waits {
            let _ = waiting.await;
        }
    }
    assert!(listening(&t, 0).await, "no session left behind");
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await, "a session for the next wait");
    client.cancel(run, "ops", "done").await.expect("a cancel");
    let ended = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken by the notification")
        .expect("the wait's task");
    assert!(
        matches!(ended, Err(Error::RunCancelled { .. })),
        "{ended:?}"
    );
    assert!(listening(&t, 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_deleted_while_waited_on_is_not_found() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    let mut waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    assert!((&mut waiting).now_or_never().is_none(), "still waiting");
    // Ended and deleted in one transaction: the wait, woken at commit,
    // finds no run.
    let mut conn = crate::start_in_pg::own_connection().await;
    let tx = conn.transaction().await.expect("begin");
    tx.execute(
        &t.sql("UPDATE {schema}.runs SET status = 'cancelled' WHERE id = $1"),
        &[&run.0],
    )
    .await
    .expect("an end");
    tx.execute(&t.sql("DELETE FROM {schema}.runs WHERE id = $1"), &[&run.0])
        .await
        .expect("a delete");
    tx.commit().await.expect("commit");
    let ended = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken")
        .expect("the wait's task");
    assert!(
        matches!(ended, Err(Error::RunNotFound { run_id }) if run_id == run),
        "{ended:?}"
    );
}
