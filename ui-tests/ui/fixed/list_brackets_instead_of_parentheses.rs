// `ui/fail/list_brackets_instead_of_parentheses.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
