// `ui/fail/removed_step_at_module_level.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;


fn main() {}
