// A `key` path that names no method is reported by the compiler at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key = Self::customr, key_concurrency = 1)]
impl Fulfil {
    fn customer(order: &Order) -> String {
        order.customer.clone()
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}
