// `#[workflow]` goes on an inherent impl block, not on a struct.
use pgbus_runtime::prelude::*;

#[derive(Serialize, Deserialize)]
struct Order {
    id: i64,
}

#[workflow(input = Order)]
struct Fulfil;

fn main() {}

// no fix: the fix is an impl of `Fulfil` with steps the case does not have; the message names it, `#[workflow] impl Fulfil { ... }`
