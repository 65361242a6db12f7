// An `on_exception(handler = ...)` method returns a `Flow`, `Option<Flow>` or either in a `Result`; `bool` is reported at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(handler = Self::decide))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn decide(&self, _cx: &StepCx<Order>, _error: &StepError) -> bool {
        true
    }
}

fn main() {}
