// `action = ` with nothing after it inside `on_exception(...)`: the error points inside the attribute, not at `#[workflow]`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(action = ))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `action = )` => `action = "pause")`
