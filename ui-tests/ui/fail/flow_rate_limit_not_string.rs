// A rate is written in quotes: `rate_limit = 10` says nothing of the period.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, rate_limit = 10)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `rate_limit = 10` => `rate_limit = "10/1s"`
