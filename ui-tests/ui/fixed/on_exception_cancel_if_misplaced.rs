// `ui/fail/on_exception_cancel_if_misplaced.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, cancel_if = Self::is_void)]
#[on_exception(action = "pause")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_void(&self, _cx: &StepCx<Order>) -> bool {
        false
    }
}

fn main() {}
