// `matches` on `#[workflow]`: it is a `wait_for(...)` option, written on the step that waits.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, matches = Self::is_mine)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_mine(&self, _cx: &StepCx<Order>, _signal: &Signal) -> bool {
        true
    }
}

fn main() {}

// fix: `, matches = Self::is_mine` => ``
// fix: `#[step]` => `#[step(wait_for(name = "payment.settled", matches = Self::is_mine))]`
