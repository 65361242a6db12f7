//! The workflows measured: five no-op steps, and one that parks on a signal
//! that never comes.

use pgbus_runtime::prelude::*;
use tokio::sync::mpsc::UnboundedSender;

/// Five steps whose bodies do nothing, so what is measured is the engine: the
/// claim, the outcome and the scheduling of the next step.
///
/// The last body also tells the benchmark, in memory, that its run reached it:
/// the benchmark learns when a batch is done (and when the worker is idle
/// again) without polling the database while it measures.
pub(crate) struct FiveSteps {
    /// Where the last step reports its run.
    pub(crate) ended: UnboundedSender<RunId>,
}

#[workflow(name = "bench.five_steps")]
impl FiveSteps {
    #[step]
    async fn s1(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn s2(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn s3(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn s4(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn s5(&self, cx: &mut StepCx<()>) {
        // Nobody listening any more (the batch gave up) is not the step's problem.
        let _ = self.ended.send(cx.run_id());
    }
}

/// The signal [`Parked`] waits for. Nothing sends it.
pub(crate) const NEVER: &str = "never";

/// One step that waits for the `never` signal: started many times and claimed
/// once each, its runs park (`waiting`, due at infinity) and stay in the due
/// index beside the work being measured.
pub(crate) struct Parked;

#[workflow(name = "bench.parked")]
impl Parked {
    #[step(wait_for = "never")]
    async fn wait(&self, _cx: &mut StepCx<()>) {}
}

/// One no-op step: what the starts-per-second measurement starts. Nothing
/// runs it; only its starts are timed.
pub(crate) struct Started;

#[workflow(name = "bench.started", input = u64)]
impl Started {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u64>) {}
}

/// The signal [`KeyHolder`] waits for. Nothing sends it.
pub(crate) const NEVER_KEYED: &str = "never_keyed";

/// One step that waits for a signal that never comes, one run per key of its
/// input, `slot = "run"` and `key_concurrency = 1`: a run claimed once holds
/// its key's slot for good, so a second run of the same key is held back
/// (`held_by`). Priority -1, ahead of [`FiveSteps`] in the due index: the
/// rows a limit holds back are at the head of the queue.
pub(crate) struct KeyHolder;

#[workflow(
    name = "bench.key_holder",
    input = u32,
    priority = -1,
    key = Self::key,
    key_concurrency = 1,
    slot = "run"
)]
impl KeyHolder {
    fn key(input: &u32) -> String {
        format!("customer-{input}")
    }

    #[step(wait_for = "never_keyed")]
    async fn wait(&self, _cx: &mut StepCx<u32>) {}
}
