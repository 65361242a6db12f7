//! Every option of every macro in one workflow, under `#![deny(warnings)]` and
//! clippy-clean shapes: the expansion adds no warning of its own.
#![deny(warnings)]

use pgbus_runtime::prelude::*;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Everything;

#[workflow(
    name = "orders.everything",
    input = Order,
    output = Option<Order>,
    queue = "orders",
    priority = 10,
    cancel_if = Self::cancelled,
    cancel_if = small,
    on_exception(matching(CardDeclined), action = "cancel"),
    schedule = "0 */5 * * * *",
    timezone = "Europe/Berlin",
    catch_up = "all(10)",
    concurrency = 10,
    key = Self::key,
    key_concurrency = 1,
    slot = "step",
    rate_limit = "100/1m",
    key_rate_limit = "5/1s",
    deadline = "1d",
    on_deadline = "cancel",
)]
#[on_exception(handler = triage, report = "never")]
impl Everything {
    fn cancelled(&self, _cx: &StepCx<Order>) -> Result<bool, CardDeclined> {
        Ok(false)
    }

    fn small(&self, cx: &StepCx<Order>) -> bool {
        cx.input().id < 10
    }

    fn mine(&self, cx: &StepCx<Order>, signal: &Signal) -> bool {
        signal.payload == serde_json::json!(cx.input().id)
    }

    fn key(order: &Order) -> String {
        order.id.to_string()
    }

    fn triage(&self, _cx: &StepCx<Order>, _error: &StepError) -> Flow {
        Flow::pause("triaged")
    }

    #[step(name = "first", wait = "0s", timeout = "5s", skip_if = small, queue = "fast", priority = -1,
           rate_limit = "1/1s")]
    async fn first_step(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    removed_step!(old);

    #[step(
        wait_for(name = "go", matches = Self::mine),
        wait_timeout = "1h30m",
        on_timeout = "skip!",
        on_exception(matching(Timeout), action = "reattempt", wait = "250ms",
                     max_reattempts = 2, terminal_action = "skip", report = "terminal_only"),
        on_exception(matching(CardDeclined), handler = triage),
        on_exception = "pause",
    )]
    async fn second(&self, _cx: &mut StepCx<Order>) -> Result<(), CardDeclined> {
        Ok(())
    }

    #[step(wait_for = "later")]
    async fn third(&self, _cx: &mut StepCx<Order>) {}

    #[fan_out(name = "fan", wait = "1d", timeout = "2h", skip_if = Self::small, queue = "fan",
              priority = 3, on_batch_failure = "cancel", on_exception(action = "skip"),
              rate_limit = "2/1m")]
    async fn spread(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }

    removed_step!("older.one");
}

fn main() {
    let definition = <Everything as Workflow>::DEFINITION;
    assert_eq!(definition.entries.len(), 6);
    assert_eq!(definition.priority, 10);
    let schedule = <Everything as Workflow>::SCHEDULE;
    assert_eq!(schedule.map(|s| s.timezone), Some("Europe/Berlin"));
    assert_eq!(
        schedule.map(|s| (s.input)().ok()),
        Some(Some(serde_json::json!({"id": 0})))
    );
    assert!(
        definition
            .options_json
            .contains(r#""output":"Option<Order>""#)
    );
    let _: Option<<Everything as Workflow>::Output> = Some(Some(Order { id: 1 }));
    assert_eq!(definition.flow.concurrency, Some(10));
    assert_eq!(
        <Everything as Workflow>::concurrency_key(&Order { id: 3 }).as_deref(),
        Some("3")
    );
}
