// `ui/fail/list_every_error_at_once.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    fn opted_out(&self, _cx: &StepCx<()>) -> bool {
        false
    }

    #[step(wait = "5s", skip_if = Self::opted_out, queue = "payments", on_exception(action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
