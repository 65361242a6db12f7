// A policy needs `action` or `handler` to say what to do.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(matching(CardDeclined)))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `on_exception(matching(CardDeclined))` => `on_exception(matching(CardDeclined), action = "pause")`
