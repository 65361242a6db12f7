// Every malformed option of a list is reported in one compile.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = , skip_if = , queue = a b, on_exception(action = ))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
