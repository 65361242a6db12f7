// A handler decides itself, so reattempt-only options like `max_reattempts` do not apply to it.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(handler = Self::decide, max_reattempts = 3))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn decide(&self, _cx: &StepCx<Order>, _error: &StepError) -> Flow {\n        Flow::Complete\n    }\n`
// fix: `, max_reattempts = 3` => ``
