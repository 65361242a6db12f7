// `on_batch_failure` is `pause`, `cancel` or `skip`; `retry` is none of them.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out(on_batch_failure = "retry")]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
