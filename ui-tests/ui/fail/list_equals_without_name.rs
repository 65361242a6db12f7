// `= "5s"` has no option name before the `=`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(= "5s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `#[step(= "5s")]` => `#[step(wait = "5s")]`
