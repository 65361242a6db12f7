// Steps take `StepCx<Order>` but the workflow names no `input`: say to add it.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `#[workflow]` => `#[workflow(input = Order)]`
