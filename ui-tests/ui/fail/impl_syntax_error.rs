// A syntax error in one step body is reported alone: no stray-attribute errors for
// the other steps, and uses of the workflow elsewhere still type-check.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<Order>) {
        let x = ;
    }

    #[step(wait = "1s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}

    removed_step!(gone);
}

fn main() {
    let _ = <Fulfil as Workflow>::DEFINITION.name;
}
