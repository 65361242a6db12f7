//! Every flow control option, under `#![deny(warnings)]`: the definition
//! carries them as written, with the defaults filled in, and the key method
//! is what `Workflow::concurrency_key` calls.
#![deny(warnings)]

use pgbus_runtime::definition::{DeadlineAction, FlowControl, Rate, SlotHolder};
use pgbus_runtime::prelude::*;

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

/// Every workflow option, and both kinds of step with a rate.
struct Fulfil;

#[workflow(
    input = Order,
    concurrency = 50,
    key = Self::customer,
    key_concurrency = 1,
    slot = "run",
    rate_limit = "100/1m",
    key_rate_limit = "10/1s",
    deadline = "2h",
    on_deadline = "pause",
)]
impl Fulfil {
    // A borrowed key is fine: anything `Into<String>`.
    fn customer(order: &Order) -> &str {
        &order.customer
    }

    #[step(rate_limit = "5/250ms")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}

    #[fan_out(rate_limit = "1/1d")]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) {}

    #[step]
    async fn ship(&self, _cx: &mut StepCx<Order>) {}
}

/// Only the per-key limit: a start gives the key. A small `Copy` input
/// taken by reference, as the contract asks, draws no lint either.
struct Keyless;

#[workflow(input = u32, key_concurrency = 2, on_deadline = "cancel")]
impl Keyless {
    #[step]
    async fn go(&self, _cx: &mut StepCx<u32>) {}
}

/// A key method named by its bare name, over a `Copy` input.
struct Numbered;

#[workflow(input = u32, key = bucket, key_rate_limit = "3/1s")]
impl Numbered {
    fn bucket(n: &u32) -> String {
        (n % 10).to_string()
    }

    #[step]
    async fn go(&self, _cx: &mut StepCx<u32>) {}
}

/// No flow option at all.
struct Plain;

#[workflow]
impl Plain {
    #[step]
    async fn go(&self, _cx: &mut StepCx<()>) {}
}

fn main() {
    let definition = <Fulfil as Workflow>::DEFINITION;
    assert_eq!(
        definition.flow,
        FlowControl {
            concurrency: Some(50),
            has_key: true,
            key_concurrency: Some(1),
            slot: SlotHolder::Run,
            rate_limit: Some(Rate {
                count: 100,
                period_ms: 60_000,
            }),
            key_rate_limit: Some(Rate {
                count: 10,
                period_ms: 1_000,
            }),
            deadline_ms: Some(7_200_000),
            on_deadline: DeadlineAction::Pause,
        }
    );
    let rates: Vec<Option<Rate>> = definition
        .entries
        .iter()
        .map(|entry| entry.options.rate_limit)
        .collect();
    assert_eq!(
        rates,
        [
            Some(Rate {
                count: 5,
                period_ms: 250,
            }),
            Some(Rate {
                count: 1,
                period_ms: 86_400_000,
            }),
            None,
        ]
    );
    let order = Order {
        id: 7,
        customer: "ada".to_owned(),
    };
    assert_eq!(order.id, 7);
    assert_eq!(
        <Fulfil as Workflow>::concurrency_key(&order).as_deref(),
        Some("ada")
    );

    assert_eq!(
        <Keyless as Workflow>::DEFINITION.flow,
        FlowControl {
            key_concurrency: Some(2),
            ..FlowControl::NONE
        }
    );
    assert_eq!(<Keyless as Workflow>::concurrency_key(&5), None);

    assert!(<Numbered as Workflow>::DEFINITION.flow.has_key);
    assert_eq!(
        <Numbered as Workflow>::concurrency_key(&42).as_deref(),
        Some("2")
    );

    assert_eq!(<Plain as Workflow>::DEFINITION.flow, FlowControl::NONE);
    assert!(!<Plain as Workflow>::DEFINITION.flow.limits());
    assert!(definition.flow.limits());
}
