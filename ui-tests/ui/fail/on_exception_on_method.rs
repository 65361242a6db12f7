// A step's policies go inside its attribute, `#[step(on_exception(...))]`, not in a separate `#[on_exception]`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    #[on_exception(action = "cancel")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `    #[on_exception(action = "cancel")]\n` => ``
// fix: `#[step]` => `#[step(on_exception(action = "cancel"))]`
