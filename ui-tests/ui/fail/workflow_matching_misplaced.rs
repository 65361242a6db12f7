// `matching` on `#[workflow]` belongs in a policy, which also needs an `action`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

struct Fulfil;

#[workflow(input = Order, matching(CardDeclined))]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `matching(CardDeclined)` => `on_exception(matching(CardDeclined), action = "pause")`
