// `skip_if` names a method; an integer is not one.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(skip_if = 1)]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn opted_out(&self, _cx: &StepCx<Order>) -> bool {\n        false\n    }\n`
// fix: `skip_if = 1` => `skip_if = Self::opted_out`
