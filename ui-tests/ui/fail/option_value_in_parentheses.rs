// Values are written `option = value`; parentheses are only for nested option lists.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait("5s"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
