// `key` picks what a per-key limit counts by: a workflow option, and the fix brings the limit it serves.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    fn customer(order: &Order) -> String {
        order.customer.clone()
    }

    #[step(key = Self::customer)]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `#[step(key = Self::customer)]` => `#[step]`
// fix: `#[workflow(input = Order)]` => `#[workflow(input = Order, key = Self::customer, key_concurrency = 1)]`
