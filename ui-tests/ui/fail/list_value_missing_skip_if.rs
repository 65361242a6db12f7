// `skip_if = ` with nothing after it: the option needs a method path.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(skip_if = )]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
