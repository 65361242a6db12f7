// Values are written `option = value`; parentheses are only for nested option lists.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(wait("5s"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// no fix: the message gives the shape, `option = value`; the fix is the case's own `wait = "5s"`
