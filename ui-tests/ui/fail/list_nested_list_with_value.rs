// `on_exception(...)` is a list; it takes no `= value` after it.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(action = "pause") = "skip")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `on_exception(action = "pause") = "skip"` => `on_exception(action = "pause")`
