// A step method cannot be `const`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    const fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `const fn charge(&self, _cx: &mut StepCx<Order>)` => `async fn charge(&self, _cx: &mut StepCx<Order>)`
