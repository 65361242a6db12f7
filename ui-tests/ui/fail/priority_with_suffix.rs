// `priority = 5u8` would silently ignore the suffix; the number is written bare.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(priority = 5u8)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `priority = 5u8` => `priority = 5`
