// A matched type must implement `std::error::Error`; the error points at the type.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

struct NotAnError;

#[workflow(input = Order)]
impl Fulfil {
    #[step(on_exception(matching(NotAnError), action = "cancel"))]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
