// `ui/fail/removed_step_cfg.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    removed_step!(gone);
}

fn main() {}
