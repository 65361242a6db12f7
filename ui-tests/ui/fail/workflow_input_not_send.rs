// The input crosses threads, so it must be `Send`; the error points at the type.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
    #[serde(skip)]
    _local: std::marker::PhantomData<*const ()>,
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
