// `ui/fail/on_exception_action_and_handler.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    fn decide(&self, _cx: &StepCx<Order>, _error: &StepError) -> Flow {
        Flow::Complete
    }

    #[step(on_exception(handler = Self::decide))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
