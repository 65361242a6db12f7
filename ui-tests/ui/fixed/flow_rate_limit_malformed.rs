// `ui/fail/flow_rate_limit_malformed.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, rate_limit = "10/1s", key_rate_limit = "10/1s")]
impl Fulfil {
    #[step(rate_limit = "10/1s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}
