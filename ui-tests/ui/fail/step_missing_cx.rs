// A step takes the step context after `&self`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn charge(&self)` => `async fn charge(&self, cx: &mut StepCx<Order>)`
