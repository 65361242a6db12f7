// A step takes `&self` and the step context; an associated fn with no arguments is neither.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge() -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `async fn charge()` => `async fn charge(&self, cx: &mut StepCx<Order>)`
