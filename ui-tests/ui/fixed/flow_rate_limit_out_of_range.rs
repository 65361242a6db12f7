// `ui/fail/flow_rate_limit_out_of_range.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key_rate_limit = "1000/1s")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}

    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) {}
}

fn main() {}
