// A `where` clause on the workflow impl makes it generic too, which a static definition cannot be.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil
where
    Order: Send,
{
    #[step]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }
}

fn main() {}
