// The 31st of February never comes: an expression that can never fire is refused.
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 0 0 31 2 *")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
