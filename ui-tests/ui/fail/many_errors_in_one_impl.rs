// Every error of one impl is reported in one compile, in source order whatever stage found it: a bad queue, a typo, a bad duration, a duplicate name with a note on the first, a policy option and a signature.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, queue = "orders eu")]
impl Fulfil {
    #[step(wiat = "5s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    #[step(timeout = "5", name = "charge")]
    async fn charge_again(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    #[step(on_exception(action = "cancel", max_reattempts = 2))]
    fn ship(&mut self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `"orders eu"` => `"orders_eu"`
// fix: `wiat` => `wait`
// fix: `timeout = "5"` => `timeout = "5s"`
// fix: `name = "charge"` => `name = "charge_again"`
// fix: `action = "cancel", max_reattempts = 2` => `action = "reattempt", max_reattempts = 2`
// fix: `fn ship(&mut self, _cx: &mut StepCx<Order>)` => `async fn ship(&self, _cx: &mut StepCx<Order>)`
