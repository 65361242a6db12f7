// `input` must name the type runs store; `impl Trait` and `_` name none.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = impl Serialize)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}

// fix: `input = impl Serialize` => `input = Order`
