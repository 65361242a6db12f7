// Step policies apply in order: one after a policy without `matching` never runs.
use pgbus_runtime::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow]
impl Fulfil {
    #[step(
        on_exception(action = "pause"),
        on_exception(matching(CardDeclined), action = "cancel"),
    )]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `        on_exception(matching(CardDeclined), action = "cancel"),\n` => ``
