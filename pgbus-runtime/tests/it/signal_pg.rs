//! Sending signals: stored with a `signal_received` event for a run that has not
//! ended, refused with nothing stored otherwise, and waking exactly the steps
//! that wait for the name; a name no step waits for is refused unless sent
//! unchecked (the check's scenarios are the testkit's contract suite). How the
//! `wait_for` gate consumes them (and the races between a signal and a wait)
//! is in `gate_pg.rs`.

use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Registration, Store as _};
use pgbus_runtime::{Error, RunStatus, SignalId, StepStatus};

use crate::pg::TestDb;

struct Two;

#[workflow(name = "signal.two")]
impl Two {
    #[step]
    async fn first(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test]
async fn a_signal_is_stored_with_its_event_and_wakes_only_its_waiters() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Two>(&()).await.expect("start").run_id;
    // Park the first step as a `wait_for = "paid"` step would be parked.
    t.execute(
        "UPDATE {schema}.steps SET status = 'waiting', waiting_for = 'paid',
                waiting_since = $2, scheduled_at = 'infinity'
         WHERE run_id = $1",
        &[&run.0, &t.clock.now()],
    )
    .await;

    // No step of `signal.two` waits for `shipped`: only unchecked.
    let other = client
        .signal_unchecked(run, "shipped", &serde_json::json!({"n": 1}))
        .await
        .expect("signal");
    let waiting = "SELECT count(*) FROM {schema}.steps WHERE run_id = $1 AND status = 'waiting'";
    assert_eq!(
        t.count(waiting, &[&run.0]).await,
        1,
        "another name wakes nothing"
    );

    t.clock.advance(std::time::Duration::from_secs(5));
    let paid = client.signal(run, "paid", "card").await.expect("signal");
    assert_eq!((other, paid), (SignalId(1), SignalId(2)));
    let view = t.run(run).await;
    assert_eq!(
        view.steps[0].status,
        StepStatus::Scheduled,
        "same attempt, woken"
    );
    assert_eq!(view.steps[0].attempt, 1);
    assert_eq!(view.steps[0].scheduled_at, t.clock.now(), "due now");
    let received: Vec<(&str, Option<&str>, Option<serde_json::Value>)> = view
        .events
        .iter()
        .filter(|e| e.event == "signal_received")
        .map(|e| (e.actor.as_str(), e.reason.as_deref(), e.details.clone()))
        .collect();
    assert_eq!(
        received,
        [
            (
                "client",
                Some("shipped"),
                Some(serde_json::json!({"signal_id": 1}))
            ),
            (
                "client",
                Some("paid"),
                Some(serde_json::json!({"signal_id": 2}))
            ),
        ]
    );
    let stored = t
        .query(
            "SELECT name, payload, consumed_by FROM {schema}.signals WHERE run_id = $1 ORDER BY id",
            &[&run.0],
        )
        .await;
    let stored: Vec<(String, serde_json::Value, Option<i64>)> = stored
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        stored,
        [
            ("shipped".to_owned(), serde_json::json!({"n": 1}), None),
            ("paid".to_owned(), serde_json::json!("card"), None),
        ]
    );
}

#[tokio::test]
async fn a_signal_for_an_ended_or_missing_run_is_refused_and_stores_nothing() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Two)
            .build()
            .expect("worker");
    let finished = client.start::<Two>(&()).await.expect("start").run_id;
    worker.run_until_idle().await.expect("run");
    let cancelled = client.start::<Two>(&()).await.expect("start").run_id;
    client.cancel(cancelled, "ops", "r").await.expect("cancel");
    let paused = client.start::<Two>(&()).await.expect("start").run_id;
    client.pause(paused, "ops", "r").await.expect("pause");

    assert!(matches!(
        client.signal(finished, "paid", &1).await,
        Err(Error::RunEnded {
            status: RunStatus::Finished,
            ..
        })
    ));
    assert!(matches!(
        client.signal(cancelled, "paid", &1).await,
        Err(Error::RunEnded {
            status: RunStatus::Cancelled,
            ..
        })
    ));
    assert!(matches!(
        client.signal(RunId(i64::MAX), "paid", &1).await,
        Err(Error::RunNotFound { .. })
    ));
    for (name, payload) in [
        ("", serde_json::json!(1)),
        ("\tpaid", serde_json::json!(1)),
        ("pa\u{7}id", serde_json::json!(1)),
        ("paid", serde_json::json!(["x\u{0}"])),
    ] {
        assert!(
            matches!(
                client.signal(paused, name, &payload).await,
                Err(Error::InvalidSignal { .. })
            ),
            "{name:?} {payload}"
        );
    }
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.signals", &[]).await,
        0
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'signal_received'",
            &[]
        )
        .await,
        0
    );
    // A paused run takes signals: it goes on with them once resumed. (No
    // step of `signal.two` waits for `paid`: checked, it is refused.)
    assert!(matches!(
        client.signal(paused, "paid", &1).await,
        Err(Error::UnknownSignal { .. })
    ));
    client
        .signal_unchecked(paused, "paid", &1)
        .await
        .expect("signal");
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.signals", &[]).await,
        1
    );
}

/// The client's check reads the registry: a name only a newer version's
/// registered definition waits for passes; a typo is refused with the
/// likely name, and stores nothing.
#[tokio::test]
async fn client_signals_are_checked_against_every_registered_definition() {
    struct Waits;

    #[workflow(name = "signal.two")]
    impl Waits {
        #[step]
        async fn first(&self, _cx: &mut StepCx<()>) {}

        #[step(wait_for = "approved")]
        async fn second(&self, _cx: &mut StepCx<()>) {}
    }

    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Two>(&()).await.expect("start").run_id;
    let refused = client.signal(run, "aproved", &1).await;
    assert!(
        matches!(&refused, Err(Error::UnknownSignal { waited_for, .. }) if waited_for.is_empty()),
        "{refused:?}"
    );
    // A worker of the version with the wait registers, and is gone: its
    // definition stays registered.
    let queues = vec!["default".to_owned()];
    let store = t.db.store();
    store
        .register_worker(&Registration {
            worker_id: "v2",
            name: "v2",
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 1,
            definitions: &[Waits::DEFINITION],
            queue_limits: &[],
        })
        .await
        .expect("a registration");
    t.execute("DELETE FROM {schema}.workers", &[]).await;
    let refused = client.signal(run, "aproved", &1).await;
    let Err(error @ Error::UnknownSignal { .. }) = refused else {
        panic!("refused, not {refused:?}");
    };
    assert!(
        error.to_string().contains("did you mean `approved`?"),
        "{error}"
    );
    client.signal(run, "approved", &1).await.expect("signal");
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.signals", &[]).await,
        1
    );
}
