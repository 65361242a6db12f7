// `61` is no second: the cron expression does not parse, reported at its literal.
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "61 * * * * *")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `"61 * * * * *"` => `"0 */5 * * * *"`
