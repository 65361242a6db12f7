// An option's value follows `=`, not `=>` as in a `match` arm.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait => "5s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait => "5s"` => `wait = "5s"`
