// `ui/fail/list_value_missing_skip_if.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    fn opted_out(&self, _cx: &StepCx<()>) -> bool {
        false
    }

    #[step(skip_if = Self::opted_out)]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
