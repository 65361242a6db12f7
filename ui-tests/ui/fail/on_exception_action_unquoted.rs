// An action is a string literal; the bare word `cancel` is not accepted.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(action = cancel))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// no fix: the message's example is another action, `"pause"`; the fix is the case's own word in quotes, `"cancel"`
