// A fan_out takes the batch by `&mut`, not by value.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `_fan: FanOut` => `_fan: &mut FanOut`
