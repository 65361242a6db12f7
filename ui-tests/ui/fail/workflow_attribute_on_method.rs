// `#[workflow]` goes on the impl block, not on a method inside it.
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
        Ok(Flow::Complete)
    }

    #[workflow]
    fn audit(&self) {}
}

fn main() {}

// fix: `    #[workflow]\n` => ``
