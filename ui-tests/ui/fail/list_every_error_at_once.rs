// Every malformed option of a list is reported in one compile.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = , skip_if = , queue = a b, on_exception(action = ))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn opted_out(&self, _cx: &StepCx<()>) -> bool {\n        false\n    }\n`
// fix: `wait = , skip_if` => `wait = "5s", skip_if`
// fix: `skip_if = , queue` => `skip_if = Self::opted_out, queue`
// fix: `queue = a b` => `queue = "payments"`
// fix: `action = )` => `action = "pause")`
