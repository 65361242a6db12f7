// `ui/fail/on_exception_on_plain_fn.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

fn audit() {}

fn main() {}
