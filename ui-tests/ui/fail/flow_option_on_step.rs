// `concurrency` limits the whole workflow; a step takes only its own `rate_limit`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(concurrency = 1)]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `#[step(concurrency = 1)]` => `#[step]`
// fix: `#[workflow(input = Order)]` => `#[workflow(input = Order, concurrency = 1)]`
