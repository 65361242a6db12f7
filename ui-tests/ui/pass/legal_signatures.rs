//! Legal variations of the step contract: `self: &Self`, named lifetimes, a
//! deprecated step, an inherent `DEFINITION` constant, a `Copy` workflow type,
//! raw identifiers, and guards named through the type.
#![deny(warnings)]
// `self: &Self` is one of the legal shapes under test.
#![allow(clippy::needless_arbitrary_self_type)]

use pgbus_runtime::prelude::*;

#[derive(Clone, Copy)]
struct Fulfil {
    limit: i64,
}

#[workflow(input = i64)]
impl Fulfil {
    #[allow(dead_code)]
    const DEFINITION: &'static str = "mine";

    fn over(&self, cx: &StepCx<i64>) -> bool {
        *cx.input() > self.limit
    }

    #[step(skip_if = Fulfil::over)]
    async fn typed_receiver(self: &Self, _cx: &mut StepCx<i64>) {}

    #[step]
    async fn lifetimes<'a>(&'a self, _cx: &'a mut StepCx<i64>) -> StepResult {
        Ok(Flow::Complete)
    }

    #[deprecated = "kept for runs parked on it"]
    #[step]
    async fn old(&self, _cx: &mut StepCx<i64>) {}

    #[step]
    async fn r#type(&self, _cx: &mut StepCx<i64>) {}
}

fn main() {
    let definition = <Fulfil as Workflow>::DEFINITION;
    let names: Vec<&str> = definition.entries.iter().map(|e| e.name).collect();
    assert_eq!(names, ["typed_receiver", "lifetimes", "old", "type"]);
    assert_eq!(Fulfil::DEFINITION, "mine");
    assert_eq!(
        definition.entries[0].options.skip_if.map(|g| g.method),
        Some("Fulfil::over")
    );
}
