//! What `Client::result` returns, and what wakes it.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, OnPause, RunStatus};

use super::{BOUND, Gate, NEVER, Receipt, Ship, listen_sql, listeners, listening, run_due};
use crate::pg::TestDb;

/// No declared output: `()`.
struct Plain;

#[workflow(name = "result.plain")]
impl Plain {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// `Ship`'s durable name read with another output type.
struct ShipAsCount;

#[workflow(name = "result.ship", input = u32, output = u32)]
impl ShipAsCount {
    #[step]
    async fn pack(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_finished_run_gives_its_typed_output() {
    let t = TestDb::new().await;
    let client = t.client();
    let started = client.start::<Ship>(&7).await.expect("a start");
    let plain = client.start::<Plain>(&()).await.expect("a start").run_id;
    t.db.worker()
        .notifications(false)
        .register(Ship)
        .register(Plain)
        .build()
        .expect("a worker")
        .run_until_idle()
        .await
        .expect("the worker runs");

    // A `Started` or a `RunId`; the last step's output, not the first's.
    let receipt = client.result::<Ship>(started).await.expect("the result");
    assert_eq!(
        receipt,
        Receipt {
            order: 7,
            parcels: 2
        }
    );
    let again = client
        .result::<Ship>(started.run_id)
        .timeout(Duration::ZERO)
        .await
        .expect("an ended run reads without waiting");
    assert_eq!(again, receipt);
    client
        .result::<Plain>(plain)
        .await
        .expect("no output is `()`");
}

#[tokio::test]
async fn a_value_of_another_type_is_a_decode_error_naming_the_run() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Ship>(&3).await.expect("a start").run_id;
    run_due(&t).await;
    let decoded = client.result::<ShipAsCount>(run).await;
    let Err(Error::ResultDecode {
        run_id,
        step,
        output_type,
        ..
    }) = &decoded
    else {
        panic!("a decode error, not {decoded:?}");
    };
    assert_eq!(
        (*run_id, step.as_deref(), *output_type),
        (run, Some("send"), "u32")
    );
    let text = decoded.expect_err("an error").to_string();
    assert_eq!(
        text,
        format!("the result of run {run} (the output of step `send`) is not a valid `u32`")
    );
}

#[tokio::test]
async fn a_missing_run_is_not_found_and_a_running_one_times_out() {
    let t = TestDb::new().await;
    let client = t.client();
    let missing = client.result::<Ship>(RunId(i64::MAX)).await;
    assert!(
        matches!(
            missing,
            Err(Error::RunNotFound {
                run_id: RunId(i64::MAX)
            })
        ),
        "{missing:?}"
    );
    let run = client.start::<Ship>(&1).await.expect("a start").run_id;
    let timed_out = client
        .result::<Ship>(run)
        .timeout(Duration::from_millis(50))
        .await;
    assert!(
        matches!(
            timed_out,
            Err(Error::ResultTimeout { run_id, status: RunStatus::Ready, waited })
                if run_id == run && waited == Duration::from_millis(50)
        ),
        "{timed_out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_is_woken_by_the_end_of_its_run() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    run_due(&t).await; // parks for `go`
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await, "the client listens");
    client.signal(run, "go", &()).await.expect("the signal");
    run_due(&t).await;
    let gone = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken by the run's end, not by a poll")
        .expect("the wait's task")
        .expect("the result");
    assert_eq!(gone, "gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_is_an_error_with_its_reason() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    client
        .cancel(run, "ops", "customer left")
        .await
        .expect("a cancel");
    let cancelled = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken")
        .expect("the wait's task");
    assert!(
        matches!(&cancelled, Err(Error::RunCancelled { run_id, reason: Some(r) }) if *run_id == run && r == "customer left"),
        "{cancelled:?}"
    );
    assert_eq!(
        cancelled.expect_err("cancelled").to_string(),
        format!("run {run} was cancelled: \"customer left\"")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_returns_at_once_or_is_waited_through() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    client.pause(run, "ops", "a look").await.expect("a pause");

    let at_once = client.result::<Gate>(run).await;
    assert!(
        matches!(&at_once, Err(Error::RunPaused { run_id, reason: Some(r), .. }) if *run_id == run && r == "a look"),
        "{at_once:?}"
    );
    // Told to wait: still paused at the timeout is `RunPaused`, not a timeout.
    let waited = client
        .result::<Gate>(run)
        .on_pause(OnPause::Wait)
        .timeout(Duration::from_millis(50))
        .await;
    assert!(matches!(waited, Err(Error::RunPaused { .. })), "{waited:?}");

    // Waiting through the pause: the resume wakes nothing, the end does.
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .on_pause(OnPause::Wait)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    client.resume(run, "ops", "fine").await.expect("a resume");
    run_due(&t).await;
    client.signal(run, "go", &()).await.expect("the signal");
    run_due(&t).await;
    let gone = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken by the end")
        .expect("the wait's task")
        .expect("the result");
    assert_eq!(gone, "gone");

    // A wait that finds the run paused while it waits returns then.
    let other = client.start::<Gate>(&()).await.expect("a start").run_id;
    let waiting = tokio::spawn(
        client
            .result::<Gate>(other)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    client.pause(other, "ops", "later").await.expect("a pause");
    let paused = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken by the pause")
        .expect("the wait's task");
    assert!(matches!(paused, Err(Error::RunPaused { .. })), "{paused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waits_share_one_connection_closed_with_the_last() {
    let t = TestDb::new().await;
    let client = t.client();
    let mut runs = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let run = client.start::<Gate>(&()).await.expect("a start").run_id;
        runs.push(run);
        // Clones share the session, as the wait's own clone does.
        let waiting = client.clone().result::<Gate>(run).poll_interval(NEVER);
        waits.push(tokio::spawn(waiting.into_future()));
    }
    assert!(listening(&t, 1).await, "one session for five waits");
    // A wait given up (its future dropped) leaves the others waiting.
    let given_up = waits.pop().expect("five waits");
    given_up.abort();
    assert!(given_up.await.expect_err("aborted").is_cancelled());
    for run in &runs[..4] {
        client.cancel(*run, "ops", "done").await.expect("a cancel");
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
    assert!(
        listening(&t, 0).await,
        "the session closes with the last wait: {:?}",
        listen_sql(&t)
    );
    assert!(listeners(&t).await.is_empty());
}
