// `wait = ,`: the value is missing before the next option.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = , timeout = "1m")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait = , timeout` => `wait = "5s", timeout`
