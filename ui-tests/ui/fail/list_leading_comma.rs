// An option list cannot start with a comma.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(, wait = "5s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `#[step(, wait = "5s")]` => `#[step(wait = "5s")]`
