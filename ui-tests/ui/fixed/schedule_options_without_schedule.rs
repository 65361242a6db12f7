// `ui/fail/schedule_options_without_schedule.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 */5 * * * *", timezone = "UTC", catch_up = "skip")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
