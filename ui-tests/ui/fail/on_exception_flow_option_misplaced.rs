// `concurrency` inside a policy: flow control is a workflow option.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(action = "pause", concurrency = 5))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `, concurrency = 5` => ``
// fix: `#[workflow(input = Order)]` => `#[workflow(input = Order, concurrency = 5)]`
