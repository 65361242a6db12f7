// `matching(...)` on a step belongs in a policy; the fix adds the `action` a policy needs.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(matching(CardDeclined))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `#[step(matching(CardDeclined))]` => `#[step(on_exception(matching(CardDeclined), action = "pause"))]`
