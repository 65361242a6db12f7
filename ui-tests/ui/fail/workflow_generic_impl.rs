// A workflow's definition is static and its name durable, so the impl cannot be generic.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil<T>(std::marker::PhantomData<T>);

#[workflow(input = Order)]
impl<T> Fulfil<T> {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
