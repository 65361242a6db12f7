//! The static definition the `#[workflow]` macro emits for each workflow: its
//! name, input type, step table with every option normalized, and digests.
//!
//! Everything here is plain data built at compile time. Methods (steps, guards,
//! handlers) are referred to by index and called through the [`Workflow`]
//! trait, so the engine can decide transitions from the definition alone.
//!
//! [`Workflow`]: crate::Workflow

use std::time::Duration;

use crate::error::StepError;
pub use pgbus_core::{
    DeadlineAction, EntryKind, ExceptionAction, FailureAction, OnTimeout, Rate, Report, SlotHolder,
};

pub use pgbus_core::defaults::{DEFAULT_MAX_REATTEMPTS, DEFAULT_QUEUE, DEFAULT_REATTEMPT_WAIT_MS};

/// A workflow's compiled definition. Built by `#[workflow]`; read it through
/// [`Workflow::DEFINITION`](crate::Workflow::DEFINITION).
#[derive(Debug)]
pub struct WorkflowDefinition {
    /// The durable workflow name (`name = "..."`, default the type's name).
    pub name: &'static str,
    /// The Rust type that implements the workflow, as written.
    pub type_name: &'static str,
    /// The input type, as written.
    pub input_type: &'static str,
    /// The queue steps run on unless a step overrides it.
    pub queue: &'static str,
    /// The priority steps run at unless a step overrides it; lower runs first.
    pub priority: i16,
    /// `cancel_if` guards, evaluated in order before every attempt and OR-ed.
    pub cancel_if: &'static [GuardRef],
    /// Workflow-level exception policies in declaration order.
    pub on_exception: &'static [ExceptionPolicy],
    /// Steps, fan-outs and gravestones, in declaration order.
    pub entries: &'static [Entry],
    /// Concurrency limits, rate limits and the deadline the workflow declares
    /// ([`FlowControl::NONE`] when it declares none).
    pub flow: FlowControl,
    /// The definition digest: SHA-256 hex of the `[name, kind]` list (see
    /// [`pgbus_core::digest`]). Changes with the step list, never with options.
    pub digest: &'static str,
    /// SHA-256 hex of [`Self::options_json`]: changes when any option changes, so
    /// an operator can see that options drifted under a run even though
    /// [`Self::digest`] did not.
    pub options_digest: &'static str,
    /// The normalized options as compact JSON: what [`Self::options_digest`] hashes.
    pub options_json: &'static str,
}

impl WorkflowDefinition {
    /// The entry with this durable name, with its index.
    #[must_use]
    pub fn entry(&self, name: &str) -> Option<(usize, &'static Entry)> {
        self.entries
            .iter()
            .enumerate()
            .find(|(_, entry)| entry.name == name)
    }

    /// The first entry that is not a gravestone, with its index.
    #[must_use]
    pub fn first_step(&self) -> Option<(usize, &'static Entry)> {
        self.next_step_after_index(None)
    }

    /// The first live entry after `index` (gravestones are passed over).
    #[must_use]
    pub fn next_step_after(&self, index: usize) -> Option<(usize, &'static Entry)> {
        self.next_step_after_index(Some(index))
    }

    /// The per-deployment overrides this definition was derived with
    /// ([`Overrides::apply`](crate::Overrides::apply)), as the `"overrides"`
    /// key of its options JSON records them (durations in milliseconds,
    /// rates as `{"count", "period_ms"}`); `None` for a definition as the
    /// source declares it.
    #[must_use]
    pub fn overrides_in_force(&self) -> Option<serde_json::Value> {
        // A source definition never has the key: skip the parse.
        if !self.options_json.contains("\"overrides\"") {
            return None;
        }
        let mut options: serde_json::Value = serde_json::from_str(self.options_json).ok()?;
        options
            .as_object_mut()?
            .remove("overrides")
            .filter(|value| !value.is_null())
    }

    fn next_step_after_index(&self, index: Option<usize>) -> Option<(usize, &'static Entry)> {
        let start = index.map_or(0, |i| i + 1);
        self.entries
            .iter()
            .enumerate()
            .skip(start)
            .find(|(_, entry)| entry.kind != EntryKind::Removed)
    }
}

/// One entry of the step table.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The durable step name (`name = "..."`, default the method name).
    pub name: &'static str,
    /// The Rust method, or `None` for a gravestone.
    pub method: Option<&'static str>,
    /// Step, fan_out or gravestone.
    pub kind: EntryKind,
    /// The normalized options; all defaults for a gravestone.
    pub options: StepOptions,
}

/// A step's options, normalized: durations in milliseconds, words as enums.
#[derive(Debug, Clone)]
pub struct StepOptions {
    /// Delay after the previous step ends, in milliseconds (`wait`, default 0).
    pub wait_ms: u64,
    /// Stall horizon in milliseconds (`timeout`); `None` uses the runtime's
    /// stall threshold.
    pub timeout_ms: Option<u64>,
    /// `skip_if` guard.
    pub skip_if: Option<GuardRef>,
    /// Queue override; `None` uses the workflow's.
    pub queue: Option<&'static str>,
    /// Priority override; `None` uses the workflow's.
    pub priority: Option<i16>,
    /// The signal this step waits for before its body runs.
    pub wait_for: Option<WaitFor>,
    /// For a fan_out: what to do when a child run is cancelled (default pause).
    pub on_batch_failure: Option<FailureAction>,
    /// Step-level exception policies in declaration order.
    pub on_exception: &'static [ExceptionPolicy],
    /// `rate_limit = "10/1s"`: at most this many starts of this step in any
    /// window, fleet-wide.
    pub rate_limit: Option<Rate>,
}

impl StepOptions {
    /// `wait_ms` as a [`Duration`].
    #[must_use]
    pub const fn wait(&self) -> Duration {
        Duration::from_millis(self.wait_ms)
    }

    /// `timeout_ms` as a [`Duration`].
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_ms.map(Duration::from_millis)
    }
}

/// A workflow's flow control: what the claim holds its steps back for, and
/// when a run is given up. Declared with `#[workflow(concurrency = N,
/// key = Self::method, key_concurrency = N, slot = "step" | "run",
/// rate_limit = "N/period", key_rate_limit = "N/period", deadline = "...",
/// on_deadline = "cancel" | "pause")]`; enforced by every store's claim
/// fleet-wide (see the runtime guide's "Flow control").
///
/// Where the ideas come from: DBOS queues (global and per-partition
/// concurrency, rate limiters), Hatchet's and Inngest's concurrency keys and
/// throttles, Temporal's workflow execution timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowControl {
    /// At most this many of the workflow's slots held at once, fleet-wide.
    pub concurrency: Option<u32>,
    /// Whether the workflow derives a concurrency key from its input
    /// (`key = Self::method`, called through
    /// [`Workflow::concurrency_key`](crate::Workflow::concurrency_key)); a
    /// start may give one too
    /// ([`StartOptions::concurrency_key`](crate::StartOptions::concurrency_key)).
    pub has_key: bool,
    /// At most this many slots held at once per key.
    pub key_concurrency: Option<u32>,
    /// What holds a slot: an in-progress step (default) or the whole run.
    pub slot: SlotHolder,
    /// At most this many step starts of the workflow per window.
    pub rate_limit: Option<Rate>,
    /// At most this many step starts per key per window.
    pub key_rate_limit: Option<Rate>,
    /// How long a run may take, in milliseconds from its start time (its
    /// `at` or `delay` if given); a start may set its own.
    pub deadline_ms: Option<u64>,
    /// What a run past its deadline becomes.
    pub on_deadline: DeadlineAction,
}

impl FlowControl {
    /// No limits, no deadline.
    pub const NONE: Self = Self {
        concurrency: None,
        has_key: false,
        key_concurrency: None,
        slot: SlotHolder::Step,
        rate_limit: None,
        key_rate_limit: None,
        deadline_ms: None,
        on_deadline: DeadlineAction::Cancel,
    };

    /// Whether any concurrency or rate limit applies to the workflow's runs
    /// (a step's own rate limit aside).
    #[must_use]
    pub const fn limits(&self) -> bool {
        self.concurrency.is_some()
            || self.key_concurrency.is_some()
            || self.rate_limit.is_some()
            || self.key_rate_limit.is_some()
    }
}

/// `wait_for`: the signal a step waits for, and what happens if it does not come.
#[derive(Debug, Clone)]
pub struct WaitFor {
    /// The signal name.
    pub signal: &'static str,
    /// A predicate on the signal (`wait_for(name = "...", matches = method)`).
    pub matches: Option<GuardRef>,
    /// How long to wait, in milliseconds (`wait_timeout`); `None` waits forever.
    pub timeout_ms: Option<u64>,
    /// What to do when `timeout_ms` passes (`on_timeout`, default pause).
    pub on_timeout: OnTimeout,
}

/// A reference to a guard-like method of the workflow (`cancel_if`, `skip_if`,
/// `wait_for(matches = ...)`), called through
/// [`Workflow::check_guard`](crate::Workflow::check_guard) or
/// [`Workflow::signal_matches`](crate::Workflow::signal_matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardRef {
    /// Index in the workflow's guard table.
    pub id: u16,
    /// The method's path, as written.
    pub method: &'static str,
}

/// A reference to an `on_exception(handler = ...)` method, called through
/// [`Workflow::handle_error`](crate::Workflow::handle_error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerRef {
    /// Index in the workflow's handler table.
    pub id: u16,
    /// The method's path, as written.
    pub method: &'static str,
}

/// One `on_exception(...)` policy.
#[derive(Debug)]
pub struct ExceptionPolicy {
    /// Error types it applies to; empty means every error.
    pub matching: &'static [ErrorMatcher],
    /// What it does.
    pub action: PolicyAction,
    /// Whether matched errors are reported.
    pub report: Report,
}

impl ExceptionPolicy {
    /// Whether this policy applies to `error`.
    #[must_use]
    pub fn matches(&self, error: &StepError) -> bool {
        self.matching.is_empty() || self.matching.iter().any(|m| (m.matches)(error))
    }

    /// Whether the policy names error types (as opposed to a blanket policy).
    #[must_use]
    pub const fn names_types(&self) -> bool {
        !self.matching.is_empty()
    }
}

/// A compiled `matching(T)` entry: a downcast check for `T`.
#[derive(Clone, Copy)]
pub struct ErrorMatcher {
    /// `T` as written.
    pub type_name: &'static str,
    /// `|error| error.is::<T>()`.
    pub matches: fn(&StepError) -> bool,
}

impl std::fmt::Debug for ErrorMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ErrorMatcher")
            .field(&self.type_name)
            .finish()
    }
}

/// What a policy does with a matched error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyAction {
    /// Pause the run.
    Pause,
    /// Cancel the run.
    Cancel,
    /// Skip the step.
    Skip,
    /// Run the step again.
    Reattempt {
        /// Delay before each new attempt, in milliseconds (default 1 s).
        wait_ms: u64,
        /// The body runs at most `max_reattempts + 1` times in a row (default 3).
        max_reattempts: u32,
        /// What the last failure does (default pause).
        terminal_action: FailureAction,
    },
    /// Ask a method of the workflow.
    Handler(HandlerRef),
}
