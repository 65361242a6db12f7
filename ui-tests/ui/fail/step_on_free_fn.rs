// `#[step]` only works on a method of a `#[workflow]` impl, not on a free function.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[step]
async fn charge(_cx: &mut StepCx<Order>) -> StepResult {
    Ok(Flow::Complete)
}

fn main() {}

// fix: `#[step]\nasync fn` => `async fn`
