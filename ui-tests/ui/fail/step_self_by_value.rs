// A step takes `&self`, not `self` by value.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn charge(self, _cx: &mut StepCx<Order>)` => `async fn charge(&self, _cx: &mut StepCx<Order>)`
