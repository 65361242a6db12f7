// A step returns a step result (`StepResult`, `Result<(), E>`, `Flow` or `()`), not `i32`.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> i32 {
        1
    }
}

fn main() {}
