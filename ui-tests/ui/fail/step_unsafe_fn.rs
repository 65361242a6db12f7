// A step method cannot be `unsafe`: the engine calls it.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async unsafe fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async unsafe fn charge(&self, _cx: &mut StepCx<Order>)` => `async fn charge(&self, _cx: &mut StepCx<Order>)`
