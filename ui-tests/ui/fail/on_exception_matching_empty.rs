// `matching()` with no type matches nothing; leave it out to match every error.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(matching(), action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
