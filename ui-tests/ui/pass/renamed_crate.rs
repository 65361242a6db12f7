// A crate that reaches the runtime under another name says so with
// `crate = "..."`; the expansion then names only that path (the unit tests of the
// macro crate check that no `::pgbus_runtime` is left in it).
extern crate pgbus_runtime as pgbus;

use pgbus::prelude::*;

struct Fulfil;

#[pgbus::workflow(crate = "pgbus")]
impl Fulfil {
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
}

fn main() {
    assert_eq!(<Fulfil as pgbus::Workflow>::DEFINITION.name, "Fulfil");
}
