// An `on_exception(handler = ...)` must name an existing method; the error points at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(handler = Self::decide))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
