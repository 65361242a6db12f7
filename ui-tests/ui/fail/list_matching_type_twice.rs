// One error type written twice without a comma in `matching(...)`.
use pgbus_runtime::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(CardDeclined CardDeclined), action = "pause"))]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `CardDeclined CardDeclined` => `CardDeclined`
