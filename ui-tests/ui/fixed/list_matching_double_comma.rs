// `ui/fail/list_matching_double_comma.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(CardDeclined, Timeout), action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
