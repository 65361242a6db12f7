// `ui/fail/step_cfg.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn beta_only(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
