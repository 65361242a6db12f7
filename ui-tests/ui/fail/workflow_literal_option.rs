// Options are written `name = value`; a bare literal is not an option.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow("orders.fulfil", input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `#[workflow("orders.fulfil"` => `#[workflow(name = "orders.fulfil"`
