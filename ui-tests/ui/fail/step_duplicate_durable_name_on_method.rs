// A step without `name` repeats the durable name an earlier step took with `name = "..."`: the error is on the method, the note on the name.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(name = "charge")]
    async fn pay(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `#[step]\n    async fn charge` => `#[step(name = "charge_2")]\n    async fn charge`
