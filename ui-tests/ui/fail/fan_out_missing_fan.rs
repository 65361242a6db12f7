// A fan_out takes the batch `fan: &mut FanOut` after the context.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn notify(&self, _cx: &mut StepCx<Order>)` => `async fn notify(&self, _cx: &mut StepCx<Order>, fan: &mut FanOut)`
