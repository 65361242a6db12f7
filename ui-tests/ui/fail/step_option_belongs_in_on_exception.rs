// `max_reattempts` is a policy option: the error says to write it inside `on_exception(...)`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(max_reattempts = 3)]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `max_reattempts = 3` => `on_exception(action = "reattempt", max_reattempts = 3)`
