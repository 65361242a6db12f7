// `timezone` and `catch_up` only say how a schedule's ticks are read; without `schedule` they are errors.
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(timezone = "UTC", catch_up = "skip")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `#[workflow(timezone` => `#[workflow(schedule = "0 */5 * * * *", timezone`
