// A `key` method returns something `Into<String>`; an `i64` is reported at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, key = Self::customer, key_concurrency = 1)]
impl Fulfil {
    fn customer(order: &Order) -> i64 {
        order.id
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}
