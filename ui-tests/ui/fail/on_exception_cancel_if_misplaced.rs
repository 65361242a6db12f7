// `cancel_if` inside a policy: it is a workflow option, and a policy cancels with `action = "cancel"`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
#[on_exception(action = "pause", cancel_if = Self::is_void)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_void(&self, _cx: &StepCx<Order>) -> bool {
        false
    }
}

fn main() {}

// fix: `, cancel_if = Self::is_void` => ``
// fix: `#[workflow(input = Order)]` => `#[workflow(input = Order, cancel_if = Self::is_void)]`
