// `key` with only a workflow-wide `concurrency` limits nothing per key: that limit counts all runs together.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, concurrency = 1, key = Self::customer)]
impl Fulfil {
    fn customer(order: &Order) -> String {
        order.customer.clone()
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `concurrency = 1, key` => `key_concurrency = 1, key`
