// `ui/fail/workflow_name_control_character.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(name = "orders.fulfil")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
