// `ui/fail/on_exception_matching_reference.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(CardDeclined), action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<()>) -> Result<(), CardDeclined> {
        Err(CardDeclined)
    }
}

fn main() {}
