// `retries` is another engine's word: nothing is close, so the message names pgbus's word and where it goes.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(retries = 3)]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `retries = 3` => `on_exception(action = "reattempt", max_reattempts = 3)`
