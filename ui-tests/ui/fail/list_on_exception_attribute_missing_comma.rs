// In a separate `#[on_exception(...)]` on the impl, a comma is missing between options.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow]
#[on_exception(report = "never" action = "cancel")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `report = "never" action = "cancel"` => `report = "never", action = "cancel"`
