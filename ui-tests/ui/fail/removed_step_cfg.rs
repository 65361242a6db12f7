// A gravestone cannot be conditional either: the digest must not depend on the build.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    #[cfg(any())]
    removed_step!(gone);
}

fn main() {}

// fix: `    #[cfg(any())]\n` => ``
