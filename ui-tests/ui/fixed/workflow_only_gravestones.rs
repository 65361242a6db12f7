// `ui/fail/workflow_only_gravestones.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    removed_step!(charge);

    #[step]
    async fn ship(&self, cx: &mut StepCx<Order>) {}
}

fn main() {}
