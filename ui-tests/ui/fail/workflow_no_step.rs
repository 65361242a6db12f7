// A workflow needs at least one `#[step]` or `#[fan_out]` method.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {}

fn main() {}

// fix: `impl Fulfil {}` => `impl Fulfil {\n    #[step]\n    async fn charge(&self, cx: &mut StepCx<Order>) {}\n}`
