// `ui/fail/list_value_missing_before_comma.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = "5s", timeout = "1m")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
