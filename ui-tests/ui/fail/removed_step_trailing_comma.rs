// `removed_step!` takes one name and nothing after it, not even a comma.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    removed_step!(legacy_check,);

    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `removed_step!(legacy_check,)` => `removed_step!(legacy_check)`
