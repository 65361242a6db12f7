// `#[cfg_attr(..., step)]` would make a method a step in some builds only.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    #[cfg_attr(all(), step(wait = "1s"))]
    async fn maybe(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `#[cfg_attr(all(), step(wait = "1s"))]` => `#[step(wait = "1s")]`
