// `ui/fail/list_braces_instead_of_parentheses.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait_for(name = "payment.settled"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
