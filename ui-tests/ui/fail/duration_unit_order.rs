// Units run from largest to smallest, each once; `5s1m` breaks the order.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait = "5s1m")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// no fix: the message shows the order with its example, `1h30m`; the fix is the case's own units reordered, `1m5s`
