// `ui/fail/step_cfg_attr.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    #[step(wait = "1s")]
    async fn maybe(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
