// `cancel_if = "..."` must hold a path to a method.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, cancel_if = "is void")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn is_void(&self, _cx: &StepCx<Order>) -> bool {\n        false\n    }\n`
// fix: `cancel_if = "is void"` => `cancel_if = Self::is_void`
