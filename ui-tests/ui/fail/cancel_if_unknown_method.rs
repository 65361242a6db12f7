// `cancel_if` must name an existing method; the error points at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, cancel_if = Self::is_void)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
