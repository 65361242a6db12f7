// The context's input type must be the workflow's input; the mismatch points at the user's type.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<String>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
