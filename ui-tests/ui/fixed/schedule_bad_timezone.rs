// `ui/fail/schedule_bad_timezone.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 0 7 * * *", timezone = "Europe/Berlin")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
