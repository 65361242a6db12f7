// `output` needs a type; a bare word is refused at the option.
use pgbus_runtime::prelude::*;

struct Fulfil;

#[workflow(output)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `struct Fulfil;` => `#[derive(Serialize, Deserialize)]\nstruct Receipt {\n    id: i64,\n}\n\nstruct Fulfil;`
// fix: `#[workflow(output)]` => `#[workflow(output = Receipt)]`
