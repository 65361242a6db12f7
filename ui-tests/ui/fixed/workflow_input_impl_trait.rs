// `ui/fail/workflow_input_impl_trait.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn main() {}
