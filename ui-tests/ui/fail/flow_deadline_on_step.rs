// `deadline` bounds the whole run and belongs on `#[workflow]`; a step's own bound is `timeout`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(deadline = "1h")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `#[step(deadline = "1h")]` => `#[step(timeout = "1h")]`
