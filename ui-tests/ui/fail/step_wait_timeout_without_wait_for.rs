// `wait_timeout` limits a signal wait, so it needs `wait_for`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_timeout = "1h")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `wait_timeout = "1h"` => `wait_for = "payment.settled", wait_timeout = "1h"`
