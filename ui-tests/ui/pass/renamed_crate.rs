//! A crate that reaches the runtime under another name says so with
//! `crate = "..."`; the expansion then names only that path (the unit tests of the
//! macro crate check that no `::pgbus_runtime` is left in it). Inside the impl,
//! `#[step]`, `#[fan_out]`, `#[on_exception]` and `removed_step!` may be written
//! bare or through that name.
extern crate pgbus_runtime as pgbus;

use pgbus::prelude::*;

struct Fulfil;

#[pgbus::workflow(crate = "pgbus")]
#[pgbus::on_exception(action = "skip")]
impl Fulfil {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}

    #[pgbus::step(wait = "1s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}

    pgbus::removed_step!(fraud_check);

    #[pgbus::fan_out]
    async fn notify(&self, _cx: &mut StepCx<()>, _fan: &mut FanOut) {}
}

fn main() {
    let definition = <Fulfil as pgbus::Workflow>::DEFINITION;
    assert_eq!(definition.name, "Fulfil");
    let names: Vec<&str> = definition.entries.iter().map(|e| e.name).collect();
    assert_eq!(names, ["reserve", "charge", "fraud_check", "notify"]);
    assert_eq!(definition.entries[1].options.wait_ms, 1_000);
}
