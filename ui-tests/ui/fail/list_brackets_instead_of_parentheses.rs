// A nested option list is written in parentheses, not brackets.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception[action = "pause"])]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `on_exception[action = "pause"]` => `on_exception(action = "pause")`
