// A `wait_for(matches = ...)` predicate returns `bool` or `Result<bool, E>`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wait_for(name = "payment.settled", matches = Self::is_mine))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_mine(&self, _cx: &StepCx<Order>, _signal: &Signal) -> i32 {
        0
    }
}

fn main() {}
