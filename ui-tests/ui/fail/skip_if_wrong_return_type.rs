// A `skip_if` method returns `bool` or `Result<bool, E>`; one returning `String` is reported at the path.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(skip_if = Self::already_charged)]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    fn already_charged(&self, _cx: &StepCx<Order>) -> String {
        String::new()
    }
}

fn main() {}
