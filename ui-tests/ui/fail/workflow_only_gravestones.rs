// Gravestones are not steps: a workflow with only `removed_step!` entries has no step to run.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
impl Fulfil {
    removed_step!(charge);
}

fn main() {}

// fix: `removed_step!(charge);` => `removed_step!(charge);\n\n    #[step]\n    async fn ship(&self, cx: &mut StepCx<Order>) {}`
