// `skip_if = ` with nothing after it: the option needs a method path.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(skip_if = )]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn opted_out(&self, _cx: &StepCx<()>) -> bool {\n        false\n    }\n`
// fix: `skip_if = )` => `skip_if = Self::opted_out)`
