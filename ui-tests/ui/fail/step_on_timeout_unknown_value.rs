// `on_timeout` is `pause`, `cancel`, `skip` or `run`; `cancle` is a typo.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for = "payment.settled", wait_timeout = "1h", on_timeout = "cancle")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `"cancle"` => `"cancel"`
