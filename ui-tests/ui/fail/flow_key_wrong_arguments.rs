// A `key` method takes exactly one argument, the input by reference.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key = customer, key_concurrency = 1)]
impl Fulfil {
    fn customer(order: &Order, region: &str) -> String {
        format!("{region}:{}", order.customer)
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `fn customer(order: &Order, region: &str) -> String {\n        format!("{region}:{}", order.customer)` => `fn customer(order: &Order) -> String {\n        order.customer.clone()`
