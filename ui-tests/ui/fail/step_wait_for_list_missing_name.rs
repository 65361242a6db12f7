// `wait_for(...)` needs the signal's `name`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for(matches = Self::is_mine))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn is_mine(&self, _cx: &StepCx<Order>, _signal: &Signal) -> bool {\n        true\n    }\n`
// fix: `wait_for(matches = Self::is_mine)` => `wait_for(name = "payment.settled", matches = Self::is_mine)`
