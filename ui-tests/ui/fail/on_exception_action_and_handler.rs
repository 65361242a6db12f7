// A policy takes `action` or `handler`, not both: a handler decides the action itself.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(action = "cancel", handler = Self::decide))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn decide(&self, _cx: &StepCx<Order>, _error: &StepError) -> Flow {\n        Flow::Complete\n    }\n`
// fix: `action = "cancel", ` => ``
