// Two commas in a row in an option list.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait = "5s",, timeout = "1m")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait = "5s",, timeout = "1m"` => `wait = "5s", timeout = "1m"`
