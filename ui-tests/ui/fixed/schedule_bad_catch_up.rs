// `ui/fail/schedule_bad_catch_up.rs` with the fix its message suggests applied (`tests/fixes.rs`).
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 0 7 * * *", catch_up = "skip")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

struct Digest;

#[workflow(schedule = "0 0 7 * * *", catch_up = "all(1000)")]
impl Digest {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}
