// `#[workflow]` goes on an inherent impl, not on a trait impl: the macro implements `Workflow` itself; the message names the type, `impl Checkout`.
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
impl Charge for Checkout {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `impl Charge for Checkout {` => `impl Checkout {`
