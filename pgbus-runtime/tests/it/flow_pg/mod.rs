//! Flow control on the Postgres store (issue 21): concurrency limits per
//! workflow, per key and per queue, and rate limits, enforced by the claim,
//! strictly, fleet-wide and without head-of-line blocking; held rows woken by
//! every path that gives a slot back; the eager handoff never bypassing a
//! limit; what registration and start write.
//!
//! The workflows declare their limits through a wrapper whose definition is
//! the inner workflow's with `flow` (and, for a step's rate, `entries`) set
//! directly ([`limited!`]), so these tests do not depend on the macro's
//! options.

mod claim;
mod registry;
mod release;
mod strict;

use pgbus_runtime::engine::{AttemptResult, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Claim, Claimer, Ended, PgStore, Registered, Registration, Store};
use pgbus_runtime::{RunId, WorkflowDefinition};

use crate::pg::TestDb;

/// A wrapper of workflow `$inner` whose definition is `$inner`'s with `flow`
/// (and `entries`, if given) replaced, and whose concurrency key is
/// `$key(input)`: the shape `#[workflow(concurrency = .., key = ..)]`
/// compiles to, without the macro.
macro_rules! limited {
    ($name:ident($inner:ty), flow: $flow:expr, key: $key:expr $(, entries: $entries:expr)? $(,)?) => {
        struct $name($inner);

        const _: () = {
            use pgbus_runtime::{
                FanOut, Flow, GuardRef, HandlerRef, Signal, StepCx, StepError, StepFuture,
                Workflow, WorkflowDefinition,
            };

            static DEFINITION: WorkflowDefinition = WorkflowDefinition {
                flow: $flow,
                $(entries: $entries,)?
                ..*<$inner as Workflow>::DEFINITION
            };

            impl Workflow for $name {
                type Input = <$inner as Workflow>::Input;
                type Output = <$inner as Workflow>::Output;
                const DEFINITION: &'static WorkflowDefinition = &DEFINITION;

                fn concurrency_key(input: &Self::Input) -> Option<String> {
                    let key: fn(&Self::Input) -> Option<String> = $key;
                    key(input)
                }

                fn run_step<'a>(
                    &'a self,
                    entry: usize,
                    cx: &'a mut StepCx<Self::Input>,
                    fan: &'a mut FanOut,
                ) -> StepFuture<'a> {
                    self.0.run_step(entry, cx, fan)
                }

                fn check_guard(
                    &self,
                    guard: GuardRef,
                    cx: &StepCx<Self::Input>,
                ) -> Result<bool, StepError> {
                    self.0.check_guard(guard, cx)
                }

                fn signal_matches(
                    &self,
                    guard: GuardRef,
                    cx: &StepCx<Self::Input>,
                    signal: &Signal,
                ) -> Result<bool, StepError> {
                    self.0.signal_matches(guard, cx, signal)
                }

                fn handle_error(
                    &self,
                    handler: HandlerRef,
                    cx: &StepCx<Self::Input>,
                    error: &StepError,
                ) -> Result<Option<Flow>, StepError> {
                    self.0.handle_error(handler, cx, error)
                }
            }
        };
    };
}
pub(crate) use limited;

/// A run's input: its concurrency key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub(crate) key: String,
}

impl Job {
    pub(crate) fn new(key: impl Into<String>) -> Self {
        Self { key: key.into() }
    }
}

/// The key method of the workflows below: the input's key.
#[allow(clippy::unnecessary_wraps)] // the shape of `Workflow::concurrency_key`
pub(crate) fn job_key(job: &Job) -> Option<String> {
    Some(job.key.clone())
}

/// Three plain steps, keyed by [`Job`]: what most tests limit.
pub(crate) struct Steps;

#[workflow(name = "flow.steps", input = Job)]
impl Steps {
    #[step]
    async fn one(&self, _cx: &mut StepCx<Job>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<Job>) {}

    #[step]
    async fn three(&self, _cx: &mut StepCx<Job>) {}
}

/// Another workflow on the same queue, never limited.
pub(crate) struct Free;

#[workflow(name = "flow.free", input = Job)]
impl Free {
    #[step]
    async fn one(&self, _cx: &mut StepCx<Job>) {}
}

/// The default queue, as a worker of these workflows claims from it.
pub(crate) fn default_queue() -> Vec<String> {
    vec!["default".to_owned()]
}

/// Registers worker `id` with `definitions` and `queue_limits`, as a worker
/// does before its first claim: what writes the limits.
pub(crate) async fn register(
    t: &TestDb,
    id: &str,
    definitions: &[&'static WorkflowDefinition],
    queue_limits: &[(String, u32)],
) {
    let queues = default_queue();
    t.db.store()
        .register_worker(&Registration {
            worker_id: id,
            name: id,
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 1,
            definitions,
            queue_limits,
        })
        .await
        .expect("a registration");
}

/// One claim of up to `limit` steps of `definitions` by worker `worker` on
/// the default queue.
pub(crate) async fn claim(
    store: &PgStore,
    worker: &str,
    definitions: &[&'static WorkflowDefinition],
    limit: usize,
) -> Vec<Claim> {
    let queues = default_queue();
    let registered = Registered::of(definitions.iter().copied());
    store
        .claim(
            &Claimer {
                worker_id: worker,
                queues: &queues,
                registered: &registered,
                stall_threshold_ms: 60_000,
            },
            limit,
        )
        .await
        .expect("a claim")
}

/// Ends `claim` (claimed by `worker`) with `verb`, offering no handoff.
pub(crate) async fn end(
    store: &PgStore,
    definition: &'static WorkflowDefinition,
    claim: &Claim,
    worker: &str,
    verb: Verb,
) -> Ended {
    store
        .end_attempt(
            definition,
            claim,
            worker,
            &AttemptResult::ok(verb, None),
            false,
            None,
        )
        .await
        .expect("an outcome")
}

/// The runs of `claims`, in order.
pub(crate) fn runs_of(claims: &[Claim]) -> Vec<RunId> {
    claims.iter().map(|c| c.run_id).collect()
}

/// The `held_by` of the latest row of `run`, read through the client's view.
pub(crate) async fn held_by(t: &TestDb, run: RunId) -> Option<String> {
    t.run(run)
        .await
        .steps
        .last()
        .expect("a step row")
        .held_by
        .clone()
}

/// Starts a run of `W` keyed `key` (through `W`'s key method).
pub(crate) async fn start<W: Workflow<Input = Job>>(t: &TestDb, key: &str) -> RunId {
    t.client()
        .start::<W>(&Job::new(key))
        .await
        .expect("a start")
        .run_id
}
