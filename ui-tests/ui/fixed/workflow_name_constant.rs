// `ui/fail/workflow_name_constant.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

const NAME: &str = "orders.fulfil";

struct Fulfil;

#[workflow(name = "orders.fulfil")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {
    let _ = NAME;
}
