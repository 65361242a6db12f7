// `#[fan_out]` in an impl without `#[workflow]` would silently do nothing, so it is an error.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `impl Fulfil {` => `#[workflow(input = Order)]\nimpl Fulfil {`
