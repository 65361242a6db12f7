// A step takes exactly `&self` and the step context; a third argument has no value to receive.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>, _extra: u32) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn charge(&self, _cx: &mut StepCx<Order>, _extra: u32)` => `async fn charge(&self, _cx: &mut StepCx<Order>)`
