// `on_timeout` needs `wait_for` (and `wait_timeout`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_timeout = "cancel")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `on_timeout = "cancel"` => `wait_for = "payment.settled", wait_timeout = "1h", on_timeout = "cancel"`
