// Inside `wait_for(...)`, a comma is missing between `name` and `matches`.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait_for(name = "payment.settled" matches = Self::same_order))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// given: `impl Fulfil {` => `impl Fulfil {\n    fn same_order(&self, _cx: &StepCx<()>, _signal: &Signal) -> bool {\n        true\n    }\n`
// fix: `name = "payment.settled" matches = Self::same_order` => `name = "payment.settled", matches = Self::same_order`
