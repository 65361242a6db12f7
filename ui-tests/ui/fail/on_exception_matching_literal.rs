// `matching(...)` lists error types, not string literals.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(matching("CardDeclined"), action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// given: `struct Fulfil;` => `#[derive(Debug, thiserror::Error)]\n#[error("card declined")]\nstruct CardDeclined;\n\nstruct Fulfil;`
// fix: `matching("CardDeclined")` => `matching(CardDeclined)`
