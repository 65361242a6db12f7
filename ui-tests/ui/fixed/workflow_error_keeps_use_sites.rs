// `ui/fail/workflow_error_keeps_use_sites.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait = "5s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn start<W: Workflow>(_input: &W::Input) -> &'static str {
    W::DEFINITION.name
}

fn main() {
    let _ = start::<Fulfil>(&Order { id: 1 });
    let _ = Fulfil::DEFINITION.digest;
}
