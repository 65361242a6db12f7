//! The order-fulfilment workflow, tested with the testkit: in memory, on a virtual
//! clock, no database and no sleeping.

use std::time::Duration;

use pgbus_examples::{Fulfil, GatewayUnavailable, NotifyVendor, Order, Settlement};
use pgbus_runtime::{Flow, RunStatus, StepError, StepOutcome};
use pgbus_testkit::{StepHarness, TestEnv};

fn settled() -> Settlement {
    Settlement {
        reference: "PAY-1".to_owned(),
    }
}

fn order(gift_wrap: bool) -> Order {
    Order {
        id: 42,
        amount_cents: 1_999,
        gift_wrap,
    }
}

#[tokio::test]
async fn an_order_goes_through_every_step() {
    let env = TestEnv::new()
        .register(NotifyVendor)
        .register(Fulfil::new(0));
    let run = env.start::<Fulfil>(&order(true)).unwrap().run_id;

    let reserved = env.run_until_idle().await;
    assert_eq!(
        reserved.len(),
        1,
        "charge waits a second after the reservation"
    );
    assert_eq!(reserved[0].step, "reserve_stock");

    env.advance(Duration::from_secs(1));
    let charged = env.run_until_idle().await;
    let steps: Vec<(&str, Option<StepOutcome>)> = charged
        .iter()
        .map(|r| (r.step.as_str(), r.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("charge", Some(StepOutcome::Completed)),
            ("await_payment", None)
        ],
        "no settlement yet: the step waits"
    );

    env.signal(
        run,
        "payment.settled",
        &Settlement {
            reference: "PAY-42".to_owned(),
        },
    )
    .unwrap();
    let rest = env.run_until_idle().await;
    let steps: Vec<&str> = rest.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "await_payment",
            "notify_vendors",
            "send",
            "send",
            "notify_vendors",
            "gift_wrap",
            "ship"
        ],
        "the fan-out waits for both vendors' child runs"
    );

    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    let paid = view
        .steps
        .iter()
        .find(|s| s.step_name == "await_payment")
        .unwrap();
    assert_eq!(paid.output, Some(serde_json::json!("PAY-42")));
    assert_eq!(view.signals[0].consumed_by, Some(paid.id));
    assert_eq!(view.batches.len(), 1);
    assert_eq!((view.batches[0].total, view.batches[0].finished), (2, 2));
    let shipped = view.steps.iter().find(|s| s.step_name == "ship").unwrap();
    assert_eq!(
        shipped.output,
        Some(serde_json::json!("shipped against R-42"))
    );
}

#[tokio::test]
async fn a_flaky_gateway_is_reattempted_until_it_recovers() {
    let env = TestEnv::new()
        .register(NotifyVendor)
        .register(Fulfil::new(2));
    let run = env.start::<Fulfil>(&order(false)).unwrap().run_id;
    env.signal(run, "payment.settled", &settled()).unwrap();

    let records = env.run_to_completion().await.unwrap();
    let charges: Vec<(i32, Option<StepOutcome>)> = records
        .iter()
        .filter(|r| r.step == "charge")
        .map(|r| (r.attempt, r.outcome))
        .collect();
    assert_eq!(
        charges,
        [
            (1, Some(StepOutcome::Reattempted)),
            (2, Some(StepOutcome::Reattempted)),
            (3, Some(StepOutcome::Completed))
        ]
    );
    let wrap = records.iter().find(|r| r.step == "gift_wrap").unwrap();
    assert_eq!(
        wrap.outcome,
        Some(StepOutcome::Skipped),
        "no gift wrap asked for"
    );
    assert_eq!(env.run(run).unwrap().run.status, RunStatus::Finished);
}

#[tokio::test]
async fn a_gateway_that_never_recovers_pauses_the_run() {
    let env = TestEnv::new()
        .register(NotifyVendor)
        .register(Fulfil::new(0));
    env.fail_step("orders.fulfil", "charge", 10, || {
        StepError::from(GatewayUnavailable { attempt: 0 })
    });
    let run = env.start::<Fulfil>(&order(false)).unwrap().run_id;

    env.run_to_completion().await.unwrap();
    let view = env.run(run).unwrap();
    assert_eq!(
        view.run.status,
        RunStatus::Paused,
        "max_reattempts = 3, then the default pause"
    );
    assert_eq!(
        view.steps
            .iter()
            .filter(|s| s.step_name == "charge")
            .count(),
        4
    );
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_examples::GatewayUnavailable")
    );
}

#[tokio::test]
async fn ship_reads_the_reservation() {
    let harness = StepHarness::new(Fulfil::new(0)).output("reserve_stock", "R-7");
    let shipped = harness.run("ship", order(false)).await;
    assert_eq!(shipped.result.unwrap(), Flow::Complete);
    assert_eq!(
        shipped.output,
        Some(serde_json::json!("shipped against R-7"))
    );

    let nothing_reserved = StepHarness::new(Fulfil::new(0))
        .run("ship", order(false))
        .await;
    assert_eq!(
        nothing_reserved.result.unwrap(),
        Flow::pause("no stock reservation to ship against")
    );
}

#[tokio::test]
async fn an_order_never_settled_is_cancelled_after_an_hour() {
    let env = TestEnv::new()
        .register(NotifyVendor)
        .register(Fulfil::new(0));
    let run = env.start::<Fulfil>(&order(false)).unwrap().run_id;

    env.run_to_completion().await.unwrap();
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Cancelled);
    let waited = view
        .steps
        .iter()
        .find(|s| s.step_name == "await_payment")
        .unwrap();
    assert_eq!(
        waited.error_class.as_deref(),
        Some("pgbus_runtime::error::WaitTimedOut")
    );
    assert_eq!(
        waited.finished_at.unwrap() - waited.waiting_since.unwrap(),
        chrono::Duration::hours(1),
        "on the virtual clock, an hour after it began to wait"
    );
    assert!(view.events.iter().any(|e| e.event == "wait_timed_out"));
}
