//! The order-fulfilment workflow, tested with the testkit: in memory, on a virtual
//! clock, no database and no sleeping.

use std::time::Duration;

use pgbus_examples::{Fulfil, GatewayUnavailable, Order};
use pgbus_runtime::{Flow, RunStatus, StepError, StepOutcome};
use pgbus_testkit::{StepHarness, TestEnv};

fn order(gift_wrap: bool) -> Order {
    Order {
        id: 42,
        amount_cents: 1_999,
        gift_wrap,
    }
}

#[tokio::test]
async fn an_order_goes_through_every_step() {
    let env = TestEnv::new().register(Fulfil::new(0));
    let run = env.start::<Fulfil>(&order(true)).unwrap();

    let reserved = env.run_until_idle().await;
    assert_eq!(
        reserved.len(),
        1,
        "charge waits a second after the reservation"
    );
    assert_eq!(reserved[0].step, "reserve_stock");

    env.advance(Duration::from_secs(1));
    let rest = env.run_until_idle().await;
    let steps: Vec<&str> = rest.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(steps, ["charge", "gift_wrap", "ship"]);

    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    let shipped = view.steps.iter().find(|s| s.step_name == "ship").unwrap();
    assert_eq!(
        shipped.output,
        Some(serde_json::json!("shipped against R-42"))
    );
}

#[tokio::test]
async fn a_flaky_gateway_is_reattempted_until_it_recovers() {
    let env = TestEnv::new().register(Fulfil::new(2));
    let run = env.start::<Fulfil>(&order(false)).unwrap();

    let records = env.run_to_completion().await;
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
    let env = TestEnv::new().register(Fulfil::new(0));
    env.fail_step("orders.fulfil", "charge", 10, || {
        StepError::from(GatewayUnavailable { attempt: 0 })
    });
    let run = env.start::<Fulfil>(&order(false)).unwrap();

    env.run_to_completion().await;
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
