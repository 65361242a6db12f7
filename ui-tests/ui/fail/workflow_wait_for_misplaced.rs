// `wait_for` on `#[workflow]`: a signal wait belongs to the step that waits.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, wait_for = "payment.settled")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `, wait_for = "payment.settled"` => ``
// fix: `#[step]` => `#[step(wait_for = "payment.settled")]`
