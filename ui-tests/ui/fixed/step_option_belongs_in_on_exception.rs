// `ui/fail/step_option_belongs_in_on_exception.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(action = "reattempt", max_reattempts = 3))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
