// Rates are `"<count>/<period>"`: no slash, a count that is no number and a period without a unit, each refused at its literal.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order, rate_limit = "10", key_rate_limit = "ten/1s")]
impl Fulfil {
    #[step(rate_limit = "10/1")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `"10"` => `"10/1s"`
// fix: `"ten/1s"` => `"10/1s"`
// fix: `"10/1"` => `"10/1s"`
