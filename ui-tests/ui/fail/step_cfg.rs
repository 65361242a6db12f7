// A `#[cfg]` step would give builds different step lists and digests.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    #[cfg(test)]
    #[step]
    async fn beta_only(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `    #[cfg(test)]\n` => ``
