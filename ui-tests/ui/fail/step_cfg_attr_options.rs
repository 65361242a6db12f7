// `#[cfg_attr]` that changes a step's options per build: the advice is per-deployment overrides.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    #[cfg_attr(test, step(wait = "1s"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `    #[cfg_attr(test, step(wait = "1s"))]\n` => ``
