// `max_reattempts` must be above zero; to never reattempt, use another action.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(action = "reattempt", max_reattempts = 0))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `action = "reattempt", max_reattempts = 0` => `action = "pause"`
