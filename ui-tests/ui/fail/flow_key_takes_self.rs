// A `key` method has no receiver: the client computes the key at start, where no workflow value exists.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key = Self::customer, key_concurrency = 1)]
impl Fulfil {
    fn customer(&self, order: &Order) -> String {
        order.customer.clone()
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `fn customer(&self, order: &Order) -> String` => `fn customer(order: &Order) -> String`
