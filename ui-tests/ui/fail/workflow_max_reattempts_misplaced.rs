// `max_reattempts` on `#[workflow]` belongs in a policy that reattempts.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, max_reattempts = 5)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `max_reattempts = 5` => `on_exception(action = "reattempt", max_reattempts = 5)`
