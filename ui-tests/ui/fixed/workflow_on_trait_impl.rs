// `ui/fail/workflow_on_trait_impl.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Checkout;

trait Charge {
    async fn charge(&self, cx: &mut StepCx<Order>) -> StepResult;
}

#[workflow(input = Order)]
impl Checkout {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
