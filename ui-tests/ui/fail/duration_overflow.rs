// A duration whose digits overflow 64 bits is rejected as too long, not a panic.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait = "99999999999999999999999s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
