#![doc = include_str!("../README.md")]

// Lets the macros' absolute `::pgbus_runtime::...` paths resolve inside this crate's
// own tests and docs too.
extern crate self as pgbus_runtime;

pub mod client;
pub mod clock;
pub mod connection;
pub mod context;
pub mod database;
pub mod definition;
pub mod deploy;
pub mod engine;
pub mod error;
pub mod executor;
pub mod fan_out;
pub mod flow;
pub mod metric;
pub mod overrides;
pub mod pg;
pub mod schedule;
pub mod start_options;
pub mod store;
pub mod timeline;
pub mod view;
pub mod window;
pub mod worker;
pub mod workflow;

pub use client::{
    BucketCounts, Client, Coverage, InsightsFilter, OutcomeCount, RegisteredWorkflow, ResultWait,
    RunActivity, SlowestSteps, Started, StepOutcomes, StepTimings, Tally, WorkerView,
};
pub use clock::{Clock, ManualClock};
pub use connection::SslMode;
pub use context::{Limits, RunId, Signal, SignalId, StepCx};
pub use database::{DEFAULT_DATABASE_URL, DEFAULT_POOL_SIZE, Database, DatabaseBuilder};
pub use definition::{
    DeadlineAction, Entry, EntryKind, ErrorMatcher, ExceptionAction, ExceptionPolicy,
    FailureAction, FlowControl, GuardRef, HandlerRef, OnTimeout, PolicyAction, Rate, Report,
    SlotHolder, StepOptions, WaitFor, WorkflowDefinition,
};
pub use engine::{
    Action, BatchStatus, EventKind, IllegalMove, OnPause, RunStatus, StepOutcome, StepStatus,
};
pub use error::{
    BadInput, Error, FanOutFailed, Message, Panicked, StepError, StepNotDefined, StepStalled,
    Timeout, Unstorable, WaitTimedOut,
};
pub use fan_out::{ChildRun, FanOut};
pub use flow::{Flow, IntoGuardResult, IntoHandlerOutcome, IntoStepResult, StepResult};
pub use overrides::{
    OVERRIDES_ENV, OVERRIDES_FILE_ENV, Overrides, StepOverrides, WorkflowOverrides,
};
pub use pg::{MAX_SCHEMA_NAME_LEN, MIGRATIONS, Migration, Schema, migrate, migrate_schema};
pub use start_options::{
    MAX_QUEUE_NAME_CHARS, MAX_START_MANY_INPUT_BYTES, MAX_STARTS_PER_CALL, StartAt, StartOptions,
};
pub use view::{
    BatchView, ConcurrencyNow, EventView, HeldBack, KeyNow, LastAttempt, LimitsNow, MinuteCounts,
    Omitted, Overview, QueueNow, RateNow, ReplicaLag, ResultView, RunCount, RunCounts, RunFilter,
    RunRead, RunSummary, RunView, SignalView, StepView, Unrunnable, ValueOf, WaitingFor,
    WorkflowNow,
};
pub use worker::{ErrorReport, StallAction, SweepReport, Sweeper, Worker, WorkerBuilder};
pub use workflow::{StepFuture, Workflow};

pub use pgbus_core::{MAX_DURATION_MS, definition_digest, format_duration_ms, parse_duration_ms};
pub use pgbus_macros::{fan_out, on_exception, removed_step, step, workflow};

/// What a workflow module needs in one `use`: the macros, the step types and
/// serde's derives.
pub mod prelude {
    pub use crate::{
        FanOut, Flow, RunId, Signal, StepCx, StepError, StepResult, Timeout, Workflow, fan_out,
        on_exception, removed_step, step, workflow,
    };
    pub use serde::{Deserialize, Serialize};
}

/// What the macro expansions use. Not part of the public API: no stability promise.
#[doc(hidden)]
pub mod __private {
    pub use crate::context::{Signal, StepCx};
    pub use crate::definition::{
        DeadlineAction, Entry, EntryKind, ErrorMatcher, ExceptionPolicy, FailureAction,
        FlowControl, GuardRef, HandlerRef, OnTimeout, PolicyAction, Rate, Report, SlotHolder,
        StepOptions, WaitFor, WorkflowDefinition,
    };
    pub use crate::error::StepError;
    pub use crate::fan_out::FanOut;
    pub use crate::flow::Flow;
    pub use crate::schedule::{CatchUp, DeclaredSchedule};
    pub use crate::workflow::{StepFuture, Workflow};

    /// The input of a declared schedule's runs: the input type's `Default`,
    /// as JSON. Named at the `schedule = "..."` literal, so an input type
    /// without `Default` is reported there.
    ///
    /// # Errors
    /// The input's own serialization error.
    pub fn schedule_input<I: Default + serde::Serialize>()
    -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(I::default())
    }

    use crate::error::StepNotDefined;
    use crate::flow::{IntoGuardResult, IntoHandlerOutcome, IntoStepResult, StepResult};

    /// The definition behind the stand-in `Workflow` implementation the macro emits
    /// beside compile errors; never used by a program that compiles.
    pub static STAND_IN_DEFINITION: WorkflowDefinition = WorkflowDefinition {
        name: "",
        type_name: "",
        input_type: "",
        queue: "",
        priority: 0,
        cancel_if: &[],
        on_exception: &[],
        entries: &[],
        flow: crate::definition::FlowControl::NONE,
        digest: "",
        options_digest: "",
        options_json: "",
    };

    /// `matching(T)` compiles to this downcast check, at the user's `T` span.
    #[must_use]
    pub fn matches_type<T: std::error::Error + 'static>(error: &StepError) -> bool {
        error.is::<T>()
    }

    /// Boxes a step body's future; spanned at the method so a non-`Send` future is
    /// reported there.
    pub fn step_future<'a, F>(future: F) -> StepFuture<'a>
    where
        F: core::future::Future<Output = StepResult> + Send + 'a,
    {
        Box::pin(future)
    }

    /// Converts whatever the step method returned.
    ///
    /// # Errors
    /// The body's error.
    pub fn into_step_result<R: IntoStepResult>(result: R) -> StepResult {
        result.into_step_result()
    }

    /// Converts whatever a guard or signal predicate returned.
    ///
    /// # Errors
    /// The guard's error.
    pub fn guard_result<R: IntoGuardResult>(result: R) -> Result<bool, StepError> {
        result.into_guard_result()
    }

    /// Converts whatever an exception handler returned.
    ///
    /// # Errors
    /// The handler's error.
    pub fn handler_outcome<R: IntoHandlerOutcome>(result: R) -> Result<Option<Flow>, StepError> {
        result.into_handler_outcome()
    }

    /// The error for an index the definition does not have.
    #[must_use]
    pub fn not_defined(definition: &WorkflowDefinition, what: &str) -> StepError {
        StepError::from(StepNotDefined {
            workflow: definition.name.to_owned(),
            step: what.to_owned(),
        })
    }

    /// The future for an entry index that is not a live step.
    #[must_use]
    pub fn no_such_step(
        definition: &'static WorkflowDefinition,
        entry: usize,
    ) -> StepFuture<'static> {
        let what = definition
            .entries
            .get(entry)
            .map_or_else(|| format!("#{entry}"), |e| e.name.to_owned());
        Box::pin(core::future::ready(Err(not_defined(definition, &what))))
    }
}
