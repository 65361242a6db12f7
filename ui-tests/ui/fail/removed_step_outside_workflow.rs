// `removed_step!` only works among the steps of a `#[workflow]` impl.
use pgbus_runtime::prelude::*;

struct Fulfil;

impl Fulfil {
    removed_step!(legacy_check);
}

fn main() {}

// fix: `    removed_step!(legacy_check);\n` => ``
