// A stray word after `on_exception(...)`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(action = "pause") x)]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `on_exception(action = "pause") x` => `on_exception(action = "pause")`
