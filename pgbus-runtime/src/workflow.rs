//! The trait `#[workflow]` implements.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::{Signal, StepCx};
use crate::definition::{GuardRef, HandlerRef, WorkflowDefinition};
use crate::error::StepError;
use crate::fan_out::FanOut;
use crate::flow::{Flow, StepResult};

/// The future of one step body.
pub type StepFuture<'a> = Pin<Box<dyn Future<Output = StepResult> + Send + 'a>>;

/// A workflow: a value holding the workflow's dependencies, plus the compiled
/// definition of its steps.
///
/// Implemented by `#[workflow]` on an inherent `impl` block; writing it by hand is
/// possible but loses the compile-time checks. The engine calls the methods below
/// by the indices in [`Self::DEFINITION`].
pub trait Workflow: Send + Sync + 'static {
    /// The run's input (`#[workflow(input = T)]`), stored as JSON.
    type Input: Serialize + DeserializeOwned + Send + 'static;

    /// The run's result (`#[workflow(output = R)]`, `()` when not declared):
    /// what [`Client::result`](crate::Client::result) decodes the output of
    /// the attempt that finished the run into (see that method for which
    /// attempt, and what a run whose last attempt recorded no output gives).
    /// Stored as JSON on the step row, as every output is; nothing checks at
    /// compile time that the last step's `cx.output(..)` writes an `R`, so a
    /// mismatch is [`Error::ResultDecode`](crate::Error::ResultDecode) when
    /// the result is read.
    type Output: Serialize + DeserializeOwned + Send + 'static;

    /// The compiled definition: name, step table with normalized options, digests.
    const DEFINITION: &'static WorkflowDefinition;

    /// The schedule declared with `#[workflow(schedule = "...")]`, if any:
    /// every worker (and `TestEnv`) that registers the workflow writes it as
    /// the schedule named after the workflow (see [`crate::schedule`]).
    const SCHEDULE: Option<&'static crate::schedule::DeclaredSchedule> = None;

    /// The concurrency key of a run with `input`, from the method
    /// `#[workflow(key = Self::method)]` names (`fn method(input: &Input) ->
    /// impl Into<String>`); `None` when the workflow declares no key. A key
    /// given at start ([`StartOptions::concurrency_key`](crate::StartOptions::concurrency_key))
    /// wins over it.
    #[must_use]
    fn concurrency_key(input: &Self::Input) -> Option<String> {
        let _ = input;
        None
    }

    /// Runs the body of entry `entry` (an index into `DEFINITION.entries`). `fan`
    /// is the batch for a `#[fan_out]` step and unused otherwise. An index that is
    /// not a live step resolves to a `StepNotDefined` error.
    fn run_step<'a>(
        &'a self,
        entry: usize,
        cx: &'a mut StepCx<Self::Input>,
        fan: &'a mut FanOut,
    ) -> StepFuture<'a>;

    /// Evaluates a `cancel_if` or `skip_if` guard.
    ///
    /// # Errors
    /// The guard's own error, or `StepNotDefined` for an unknown guard.
    fn check_guard(&self, guard: GuardRef, cx: &StepCx<Self::Input>) -> Result<bool, StepError>;

    /// Evaluates a `wait_for(matches = ...)` predicate against a signal.
    ///
    /// # Errors
    /// The predicate's own error, or `StepNotDefined` for an unknown predicate.
    fn signal_matches(
        &self,
        guard: GuardRef,
        cx: &StepCx<Self::Input>,
        signal: &Signal,
    ) -> Result<bool, StepError>;

    /// Asks an `on_exception(handler = ...)` method what to do with `error`.
    /// `Ok(None)` means the handler gave no verb; the engine pauses the run.
    ///
    /// # Errors
    /// The handler's own error, or `StepNotDefined` for an unknown handler.
    fn handle_error(
        &self,
        handler: HandlerRef,
        cx: &StepCx<Self::Input>,
        error: &StepError,
    ) -> Result<Option<Flow>, StepError>;
}
