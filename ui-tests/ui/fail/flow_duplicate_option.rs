// A flow option is given once, as any other: a second `rate_limit` on one step is refused.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(rate_limit = "10/1s", rate_limit = "20/1s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `, rate_limit = "20/1s"` => ``
