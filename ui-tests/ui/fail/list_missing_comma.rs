// Options are separated by commas; one is missing between `wait` and `timeout`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = "5s" timeout = "1m")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait = "5s" timeout = "1m"` => `wait = "5s", timeout = "1m"`
