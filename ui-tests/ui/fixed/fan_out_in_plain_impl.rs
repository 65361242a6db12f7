// `ui/fail/fan_out_in_plain_impl.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
