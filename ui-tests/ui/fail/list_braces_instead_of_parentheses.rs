// A nested option list is written in parentheses, not braces.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait_for{name = "payment.settled"})]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `wait_for{name = "payment.settled"}` => `wait_for(name = "payment.settled")`
