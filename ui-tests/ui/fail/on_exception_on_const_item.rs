// `#[on_exception]` cannot go on an associated const of the workflow impl.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[on_exception(action = "cancel")]
    const LIMIT: u32 = 3;

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `    #[on_exception(action = "cancel")]\n    const` => `    const`
