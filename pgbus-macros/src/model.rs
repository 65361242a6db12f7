//! Stage two's output: a validated, normalized workflow definition that keeps
//! the spans the expansion needs for its type checks. Nothing here is syn's item
//! tree; the expansion reads only this.

use pgbus_core::{DeadlineAction, EntryKind, FailureAction, OnTimeout, Rate, Report, SlotHolder};
use proc_macro2::Span;
use syn::{Ident, Path, Type};

/// A workflow that passed every rule.
pub(crate) struct WorkflowDef {
    /// The path of the runtime crate: `::pgbus_runtime` unless `crate = "..."`.
    pub(crate) krate: proc_macro2::TokenStream,
    pub(crate) name: String,
    /// The implementing type, e.g. `Fulfil`.
    pub(crate) self_ty: Type,
    /// The input type; `()` when not given.
    pub(crate) input: Type,
    /// The result type; `()` when not given.
    pub(crate) output: Type,
    /// Whether `output` was written (the options digest names it only then,
    /// so declaring no output keeps the digest of earlier versions).
    pub(crate) output_written: bool,
    pub(crate) queue: String,
    pub(crate) priority: i16,
    pub(crate) cancel_if: Vec<Path>,
    pub(crate) policies: Vec<PolicyDef>,
    pub(crate) entries: Vec<EntryDef>,
    pub(crate) digest: String,
    pub(crate) options_json: String,
    pub(crate) options_digest: String,
    /// `schedule = "..."` with its zone and catch-up policy, checked.
    pub(crate) schedule: Option<ScheduleDef>,
    /// Concurrency limits, rate limits and the deadline, checked.
    pub(crate) flow: FlowDef,
}

/// The flow control options, each `None` when not written (the options digest
/// names only those written, so a workflow without them keeps the digest of
/// earlier versions); the expansion fills in the defaults.
#[derive(Default)]
pub(crate) struct FlowDef {
    pub(crate) concurrency: Option<u32>,
    /// The `key` method, as written.
    pub(crate) key: Option<Path>,
    pub(crate) key_concurrency: Option<u32>,
    pub(crate) slot: Option<SlotHolder>,
    pub(crate) rate_limit: Option<Rate>,
    pub(crate) key_rate_limit: Option<Rate>,
    pub(crate) deadline_ms: Option<u64>,
    pub(crate) on_deadline: Option<DeadlineAction>,
}

impl FlowDef {
    /// Whether no flow option was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.concurrency.is_none()
            && self.key.is_none()
            && self.key_concurrency.is_none()
            && self.slot.is_none()
            && self.rate_limit.is_none()
            && self.key_rate_limit.is_none()
            && self.deadline_ms.is_none()
            && self.on_deadline.is_none()
    }
}

/// A schedule declared on the workflow: its runs get `Default::default()` of
/// the input, checked at `span` (the expression's literal).
pub(crate) struct ScheduleDef {
    pub(crate) expression: String,
    pub(crate) timezone: String,
    pub(crate) catch_up: pgbus_core::schedule::CatchUp,
    pub(crate) span: Span,
}

/// One entry of the step table.
pub(crate) struct EntryDef {
    /// The durable name.
    pub(crate) name: String,
    pub(crate) kind: EntryKind,
    /// The method and its checked argument types; `None` for a gravestone.
    pub(crate) method: Option<MethodDef>,
    pub(crate) options: StepDef,
}

/// A step method the expansion dispatches to.
pub(crate) struct MethodDef {
    pub(crate) ident: Ident,
    pub(crate) cx_ty: Type,
    pub(crate) fan_ty: Option<Type>,
}

/// Normalized step options.
#[derive(Default)]
pub(crate) struct StepDef {
    pub(crate) wait_ms: u64,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) skip_if: Option<Path>,
    pub(crate) queue: Option<String>,
    pub(crate) priority: Option<i16>,
    pub(crate) wait_for: Option<WaitForDef>,
    pub(crate) on_batch_failure: Option<FailureAction>,
    pub(crate) policies: Vec<PolicyDef>,
    /// `rate_limit`: starts of this step per window.
    pub(crate) rate_limit: Option<Rate>,
}

pub(crate) struct WaitForDef {
    pub(crate) signal: String,
    pub(crate) matches: Option<Path>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) on_timeout: OnTimeout,
}

pub(crate) struct PolicyDef {
    pub(crate) matching: Vec<Type>,
    pub(crate) action: ActionDef,
    pub(crate) report: Report,
}

pub(crate) enum ActionDef {
    Pause,
    Cancel,
    Skip,
    Reattempt {
        wait_ms: u64,
        max_reattempts: u32,
        terminal_action: FailureAction,
    },
    Handler(Path),
}

/// A durable name with the span to blame for it.
pub(crate) struct NamedAt {
    pub(crate) name: String,
    pub(crate) span: Span,
}
