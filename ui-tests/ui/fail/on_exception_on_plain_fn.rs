// `#[on_exception]` only works on a `#[workflow]` impl, not on a free function.
use pgbus_runtime::prelude::*;

#[on_exception(action = "cancel")]
fn audit() {}

fn main() {}

// fix: `#[on_exception(action = "cancel")]\n` => ``
