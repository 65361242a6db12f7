// `queue = @`: what follows `=` is not a value.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(queue = @)]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `queue = @` => `queue = "payments"`
