// `ui/fail/flow_key_on_step.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key = Self::customer, key_concurrency = 1)]
impl Fulfil {
    fn customer(order: &Order) -> String {
        order.customer.clone()
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}
