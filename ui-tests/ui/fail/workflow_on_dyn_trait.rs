// `#[workflow]` needs a named type, not a trait object.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

trait Named {}

#[workflow(input = Order)]
impl dyn Named {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// no fix: an impl of a trait object has no type to name: the example shows the shape, `impl Fulfil { ... }`
