// `matching` lists error types in parentheses, not as `matching = ...`.
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
    #[step(on_exception(matching = CardDeclined, action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `matching = CardDeclined` => `matching(CardDeclined, Timeout)`
