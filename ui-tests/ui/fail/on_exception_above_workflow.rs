// `#[on_exception]` is written below `#[workflow]`; above it, it runs first and sees no workflow.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[on_exception(action = "cancel")]
#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `#[on_exception(action = "cancel")]\n#[workflow(input = Order)]` => `#[workflow(input = Order)]\n#[on_exception(action = "cancel")]`
