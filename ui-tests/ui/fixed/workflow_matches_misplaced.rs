// `ui/fail/workflow_matches_misplaced.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for(name = "payment.settled", matches = Self::is_mine))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_mine(&self, _cx: &StepCx<Order>, _signal: &Signal) -> bool {
        true
    }
}

fn main() {}
