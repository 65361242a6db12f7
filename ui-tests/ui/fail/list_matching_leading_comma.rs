// `matching(,)` starts with a comma and names no type.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(,), action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `matching(,), action` => `action`
