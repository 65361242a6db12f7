// `ui/fail/cancel_if_string_not_a_path.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, cancel_if = Self::is_void)]
impl Fulfil {
    fn is_void(&self, _cx: &StepCx<Order>) -> bool {
        false
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
