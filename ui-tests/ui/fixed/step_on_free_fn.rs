// `ui/fail/step_on_free_fn.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

async fn charge(_cx: &mut StepCx<Order>) -> StepResult {
    Ok(Flow::Complete)
}

fn main() {}
