// `removed_step!` at module level is outside any `#[workflow]` impl.
use pgbus_runtime::prelude::*;

removed_step!(legacy_check);

fn main() {}

// fix: `removed_step!(legacy_check);\n` => ``
