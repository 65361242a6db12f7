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

// given: `struct Fulfil;` => `#[derive(Serialize, Deserialize)]\nstruct Receipt {\n    id: i64,\n}\n\nstruct Fulfil;`
// fix: `output = "Vec<Receipt"` => `output = "Vec<Receipt>"`
