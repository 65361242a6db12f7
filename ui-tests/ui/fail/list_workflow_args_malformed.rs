// A malformed `#[workflow(...)]` list: `queue = ` has no value.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(name = "orders.fulfil", queue = )]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `queue = )` => `queue = "payments")`
