// Step futures run on a multi-threaded worker, so holding an `Rc` across an `.await` is an error at the method.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        let shared = std::rc::Rc::new(1);
        std::future::ready(()).await;
        drop(shared);
        Ok(Flow::Complete)
    }
}

fn main() {}
