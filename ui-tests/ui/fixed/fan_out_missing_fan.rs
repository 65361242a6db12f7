// `ui/fail/fan_out_missing_fan.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
