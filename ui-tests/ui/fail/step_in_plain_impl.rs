// `#[step]` in an impl without `#[workflow]` would silently do nothing, so it is an error.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `impl Fulfil {` => `#[workflow(input = Order)]\nimpl Fulfil {`
