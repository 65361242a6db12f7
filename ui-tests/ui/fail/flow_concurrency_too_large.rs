// A concurrency limit is at most `MAX_CONCURRENCY` (100,000).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key_concurrency = 250000)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `, key_concurrency = 250000` => ``
