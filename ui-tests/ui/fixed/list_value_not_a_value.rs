// `ui/fail/list_value_not_a_value.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(queue = "payments")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
