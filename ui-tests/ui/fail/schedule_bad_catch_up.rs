// `catch_up` takes `skip`, `one`, `all` or `all(N)` up to 1000; both of these are refused.
use pgbus_runtime::prelude::*;

struct Report;

#[workflow(schedule = "0 0 7 * * *", catch_up = "sikp")]
impl Report {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

struct Digest;

#[workflow(schedule = "0 0 7 * * *", catch_up = "all(5000)")]
impl Digest {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn main() {}

// fix: `"sikp"` => `"skip"`
// fix: `"all(5000)"` => `"all(1000)"`
