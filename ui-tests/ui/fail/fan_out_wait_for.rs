// A fan_out waits for its child runs, not for a signal, so `wait_for` is not allowed on it.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out(wait_for = "payment.settled")]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `#[fan_out(wait_for = "payment.settled")]` => `#[fan_out]`
