// `matching(&E)` would compile and never match: a step's error is owned.
use pgbus_runtime::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(on_exception(matching(&CardDeclined), action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<()>) -> Result<(), CardDeclined> {
        Err(CardDeclined)
    }
}

fn main() {}

// fix: `matching(&CardDeclined)` => `matching(CardDeclined)`
