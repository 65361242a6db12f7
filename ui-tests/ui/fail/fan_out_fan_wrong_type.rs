// The fan_out batch is `&mut FanOut`; another type points at the user's type.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<Order>, _fan: &mut Vec<u32>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
