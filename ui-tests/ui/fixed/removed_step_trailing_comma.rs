// `ui/fail/removed_step_trailing_comma.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    removed_step!(legacy_check);

    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
