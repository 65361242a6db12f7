// `removed_step!` takes the name alone, not `name = "..."`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    removed_step!(name = "legacy.check");

    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `removed_step!(name = "legacy.check")` => `removed_step!("legacy.check")`
