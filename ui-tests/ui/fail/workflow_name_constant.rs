// A constant's name is not its value: the macro reads tokens, so the name is written out.
use pgbus_runtime::prelude::*;

const NAME: &str = "orders.fulfil";

struct Fulfil;

#[workflow(name = NAME)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {
    let _ = NAME;
}

// fix: `name = NAME` => `name = "orders.fulfil"`
