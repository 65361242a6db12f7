// A `cancel_if` method takes `(&self, &StepCx<I>)`; one taking no context is reported at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order, cancel_if = Self::is_void)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn is_void(&self) -> bool {
        false
    }
}

fn main() {}
