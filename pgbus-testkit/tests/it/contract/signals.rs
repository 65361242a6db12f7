//! Signals checked against definitions (issue 19): a store's `signal` refuses
//! a name no definition of the run's workflow waits for, with the names that
//! are and a did-you-mean, unless sent unchecked; the same in both stores.

use pgbus_runtime::engine::{RunStatus, SignalCheck};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Registration, Store};
use pgbus_runtime::{Action, Error, RunRead, SignalId};

use super::{Clocked, Pair, Pinned, memory};

/// A workflow whose second step waits for `payment.settled`.
struct PayV1;

#[workflow(name = "contract.pay", input = u8)]
impl PayV1 {
    #[step]
    async fn order(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait_for = "payment.settled")]
    async fn ship(&self, _cx: &mut StepCx<u8>) {}
}

/// Its next version: a step that waits for `refund.asked` too.
struct PayV2;

#[workflow(name = "contract.pay", input = u8)]
impl PayV2 {
    #[step]
    async fn order(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait_for = "payment.settled")]
    async fn ship(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait_for = "refund.asked")]
    async fn refund(&self, _cx: &mut StepCx<u8>) {}
}

/// A build of the first version's step list (same digest) whose `ship` waits
/// for another name: an option, outside the digest.
struct PayRenamed;

#[workflow(name = "contract.pay", input = u8)]
impl PayRenamed {
    #[step]
    async fn order(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait_for = "payment.cleared")]
    async fn ship(&self, _cx: &mut StepCx<u8>) {}
}

async fn register<S: Store>(
    store: &S,
    worker: &str,
    definitions: &[&'static pgbus_runtime::WorkflowDefinition],
) {
    let queues = vec![PayV1::DEFINITION.queue.to_owned()];
    store
        .register_worker(&Registration {
            worker_id: worker,
            name: worker,
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

async fn send<S: Store>(
    store: &S,
    run: RunId,
    name: &str,
    check: SignalCheck,
) -> Result<SignalId, Error> {
    store
        .signal(run, name, &serde_json::json!({"n": 1}), check)
        .await
}

/// (signals stored, `signal_received` events) of `run`.
async fn stored<S: Store>(store: &S, run: RunId) -> (usize, usize) {
    let view = store.run(run, RunRead::default()).await.expect("the run");
    let received = view
        .events
        .iter()
        .filter(|e| e.event == "signal_received")
        .count();
    (view.signals.len(), received)
}

/// A typo is refused with the names waited for and the likely one, and
/// nothing is stored; sent unchecked it is stored; the right name passes.
async fn a_name_no_step_waits_for_is_refused<C: Clocked>(clocked: C) {
    let store = clocked.store();
    assert_eq!(
        PayV1::DEFINITION.digest,
        PayRenamed::DEFINITION.digest,
        "one step list"
    );
    let (run, _) = store
        .start_run(
            PayV1::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let refused = send(store, run, "payment.setled", SignalCheck::Waited).await;
    let Err(Error::UnknownSignal {
        run_id,
        workflow,
        name,
        waited_for,
        suggestion,
    }) = refused
    else {
        panic!("refused, not {refused:?}");
    };
    assert_eq!(
        (run_id, workflow.as_str(), name.as_str()),
        (run, "contract.pay", "payment.setled")
    );
    assert_eq!(waited_for, ["payment.settled"], "the run's own plan");
    assert_eq!(suggestion.as_deref(), Some("payment.settled"));
    assert_eq!(stored(store, run).await, (0, 0), "nothing stored");

    send(store, run, "payment.setled", SignalCheck::Unchecked)
        .await
        .expect("sent unchecked");
    send(store, run, "payment.settled", SignalCheck::Waited)
        .await
        .expect("a name the run waits for");
    assert_eq!(stored(store, run).await, (2, 2));

    // A workflow with no wait at all: every name is refused, and says so.
    let (pair, _) = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let refused = send(store, pair, "go", SignalCheck::Waited).await;
    let Err(error @ Error::UnknownSignal { .. }) = refused else {
        panic!("refused, not {refused:?}");
    };
    assert!(
        error
            .to_string()
            .contains("(none of its steps waits for a signal)"),
        "{error}"
    );
}

/// A name any registered definition of the workflow waits for passes, a
/// version the run did not start with included, and a build of the same
/// digest whose wait differs; and it still does once that version's
/// workers are gone (a signal waits for a worker, whichever is up).
async fn a_name_a_registered_version_waits_for_passes<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (run, _) = store
        .start_run(
            PayV1::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    for name in ["refund.asked", "payment.cleared"] {
        let refused = send(store, run, name, SignalCheck::Waited).await;
        assert!(
            matches!(refused, Err(Error::UnknownSignal { .. })),
            "{name}: {refused:?}"
        );
    }
    register(store, "v2-worker", &[PayV2::DEFINITION]).await;
    register(store, "renamed-worker", &[PayRenamed::DEFINITION]).await;
    clocked.worker_died("v2-worker").await;
    clocked.worker_died("renamed-worker").await;
    clocked.advance(std::time::Duration::from_hours(1));
    for name in ["refund.asked", "payment.cleared", "payment.settled"] {
        send(store, run, name, SignalCheck::Waited)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let refused = send(store, run, "refund.askd", SignalCheck::Waited).await;
    let Err(Error::UnknownSignal {
        waited_for,
        suggestion,
        ..
    }) = refused
    else {
        panic!("refused, not {refused:?}");
    };
    assert_eq!(
        waited_for,
        ["payment.cleared", "payment.settled", "refund.asked"]
    );
    assert_eq!(suggestion.as_deref(), Some("refund.asked"));
}

/// The checks come in order: a bad name or payload, then a missing run,
/// then an ended one, then the name; nothing is stored.
async fn the_signal_checks_come_in_order<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (run, _) = store
        .start_run(
            PayV1::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let bad = send(store, RunId(i64::MAX), " padded", SignalCheck::Waited).await;
    assert!(matches!(bad, Err(Error::InvalidSignal { .. })), "{bad:?}");
    let missing = send(store, RunId(i64::MAX), "nope", SignalCheck::Waited).await;
    assert!(
        matches!(missing, Err(Error::RunNotFound { .. })),
        "{missing:?}"
    );
    store
        .act(run, Action::Cancel, "ops", "done with it")
        .await
        .expect("a cancel");
    let ended = send(store, run, "nope", SignalCheck::Waited).await;
    assert!(
        matches!(
            ended,
            Err(Error::RunEnded {
                status: RunStatus::Cancelled,
                ..
            })
        ),
        "{ended:?}"
    );
    let ended = send(store, run, "nope", SignalCheck::Unchecked).await;
    assert!(matches!(ended, Err(Error::RunEnded { .. })), "{ended:?}");
    assert_eq!(stored(store, run).await, (0, 0));
}

both_stores!(
    a_name_no_step_waits_for_is_refused,
    a_name_a_registered_version_waits_for_passes,
    the_signal_checks_come_in_order,
);
