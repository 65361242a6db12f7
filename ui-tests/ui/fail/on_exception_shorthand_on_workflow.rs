// The `on_exception = "..."` shorthand is a step option; on `#[workflow]` a policy is written `on_exception(...)`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, on_exception = "cancel")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `on_exception = "cancel"` => `on_exception(action = "cancel")`
