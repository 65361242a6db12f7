// A workflow-level `#[on_exception]` needs options saying what to do.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
#[on_exception]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `struct Fulfil;` => `#[derive(Debug, thiserror::Error)]\n#[error("card declined")]\nstruct CardDeclined;\n\nstruct Fulfil;`
// fix: `#[on_exception]` => `#[on_exception(matching(CardDeclined), action = "cancel")]`
