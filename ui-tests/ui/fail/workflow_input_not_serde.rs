// The input is stored as JSON, so it must be `Serialize + DeserializeOwned`; the error points at the type.
use pgbus_runtime::prelude::*;

struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, cx: &mut StepCx<Order>) -> StepResult {
        let _ = cx.input().id;
        Ok(Flow::Complete)
    }
}

fn main() {}
