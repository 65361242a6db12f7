// `wait = "5s" "6s"`: an option takes one value.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = "5s" "6s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait = "5s" "6s"` => `wait = "5s"`
