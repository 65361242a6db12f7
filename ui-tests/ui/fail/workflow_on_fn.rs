// `#[workflow]` goes on an inherent impl block, not on a free function.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

struct Fulfil;

#[workflow(input = Order)]
fn fulfil() {}

fn main() {}

// no fix: a function is not a workflow: the example shows the shape, an impl of a type with steps the case does not have
