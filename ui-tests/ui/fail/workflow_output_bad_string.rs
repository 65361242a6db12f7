// `output = "..."` must hold a valid type.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(output = "Vec<Receipt")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
