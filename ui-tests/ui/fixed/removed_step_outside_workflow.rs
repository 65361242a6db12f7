// `ui/fail/removed_step_outside_workflow.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Fulfil;

impl Fulfil {
}

fn main() {}
