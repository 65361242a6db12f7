// `on_timeout` without `wait_timeout` could never fire.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for = "payment.settled", on_timeout = "cancel")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `on_timeout = "cancel"` => `wait_timeout = "1h", on_timeout = "cancel"`
