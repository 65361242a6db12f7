// `ui/fail/list_fat_arrow.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = "5s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
