// `wait_timeout` inside `wait_for(...)`: it is a step option, written beside it.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for(name = "payment.settled", wait_timeout = "1h"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `wait_for(name = "payment.settled", wait_timeout = "1h")` => `wait_for(name = "payment.settled"), wait_timeout = "1h"`
