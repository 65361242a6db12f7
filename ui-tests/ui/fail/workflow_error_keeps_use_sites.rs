// One bad option is one error: code that uses the workflow elsewhere is not
// reported as well.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    #[step(wiat = "5s")]
    async fn charge(&self, _cx: &mut StepCx<Order>) {}
}

fn start<W: Workflow>(_input: &W::Input) -> &'static str {
    W::DEFINITION.name
}

fn main() {
    let _ = start::<Fulfil>(&Order { id: 1 });
    let _ = Fulfil::DEFINITION.digest;
}

// fix: `wiat` => `wait`
