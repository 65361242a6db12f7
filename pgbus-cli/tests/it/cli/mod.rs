//! The `pgbus` binary against the real server: each test in a schema of its
//! own, the runs made and worked through the library, the command run as an
//! operator would (`DATABASE_URL`, `PGBUS_SCHEMA`), its output and exit code
//! checked.

mod actions;
mod deploy;
mod family;
mod follow;
mod reads;
mod replica;
mod schedules;
mod unrunnable;

use pgbus_runtime::prelude::*;

use crate::common::TestSchema;

struct Ops;

#[workflow(name = "cli.ops")]
impl Ops {
    #[step]
    async fn first(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&"one")?;
        Ok(Flow::Complete)
    }

    #[step(wait_for(name = "go"))]
    async fn second(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn third(&self, _cx: &mut StepCx<()>) {}
}

/// Runs a worker of [`Ops`] on `t` until nothing is due.
async fn work(t: &TestSchema) {
    let worker = t.db.worker().register(Ops).build().expect("worker");
    worker.run_until_idle().await.expect("run");
}
