// `slot` says what holds a concurrency slot; with no `concurrency` or `key_concurrency` there is none to hold.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, rate_limit = "10/1s", slot = "run")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `, slot = "run"` => ``
