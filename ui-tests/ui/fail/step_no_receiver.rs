// A step is a method taking `&self`, not an associated function.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(_cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn charge(_cx: &mut StepCx<Order>)` => `async fn charge(&self, _cx: &mut StepCx<Order>)`
