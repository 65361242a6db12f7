// Two commas in a row between error types.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(CardDeclined,, Timeout), action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// given: `struct Fulfil;` => `#[derive(Debug, thiserror::Error)]\n#[error("card declined")]\nstruct CardDeclined;\n\nstruct Fulfil;`
// fix: `CardDeclined,, Timeout` => `CardDeclined, Timeout`
