// A gravestone cannot reuse the durable `name` of a live step, even when the method is called differently.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    removed_step!(legacy);

    #[step(name = "legacy")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `    removed_step!(legacy);\n` => ``
