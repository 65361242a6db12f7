// `on_batch_fail` is not a `#[fan_out]` option; `on_batch_failure` is suggested.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out(on_batch_fail = "skip")]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}

// fix: `on_batch_fail =` => `on_batch_failure =`
