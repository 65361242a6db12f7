// A trailing `!` is accepted on `pause`, `cancel` and `skip`, but not on `run`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for = "payment.settled", wait_timeout = "1h", on_timeout = "run!")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `"run!"` => `"run"`
