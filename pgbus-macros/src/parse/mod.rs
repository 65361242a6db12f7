//! Stage one: syn tokens to raw, unvalidated options with their spans. This is
//! the only stage that reads syn's item tree; it also strips the pgbus
//! attributes and `removed_step!` invocations from the impl so the cleaned impl
//! can be emitted whatever happens next.

mod conditional;
mod flow;
mod gravestone;
mod key;
mod list;
mod on_exception;
mod options;
mod ours;
mod placement;
mod signature;
mod step;
pub(crate) mod values;
mod workflow;

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::{EntryKind, ExceptionAction, FailureAction, OnTimeout, Report};
use proc_macro2::Span;
use syn::Type;
use syn::spanned::Spanned;

use values::{DurationMs, Int, PathArg, Text, Word};

pub(crate) use flow::{RateArg, RawFlow};
pub(crate) use ours::Ours;
pub(crate) use workflow::workflow;

/// `#[workflow(...)]` and the impl it sits on, before validation.
pub(crate) struct RawWorkflow {
    pub(crate) name: Option<Text>,
    pub(crate) input: Option<Type>,
    /// `output = R`: the run's result type.
    pub(crate) output: Option<Type>,
    pub(crate) queue: Option<Text>,
    pub(crate) priority: Option<Int>,
    pub(crate) cancel_if: Vec<syn::Path>,
    pub(crate) policies: Vec<RawPolicy>,
    pub(crate) entries: Vec<RawEntry>,
    /// The type the impl is for, e.g. `Fulfil`.
    pub(crate) self_ty: Type,
    /// The last identifier of the self type: the default workflow name.
    pub(crate) type_ident: Option<syn::Ident>,
    /// `crate = "path"`: where the runtime is, when it is not `::pgbus_runtime`.
    pub(crate) krate: Option<syn::Path>,
    /// `input` was written, valid or not.
    pub(crate) input_written: bool,
    /// `schedule = "..."`, `timezone = "..."`, `catch_up = "..."`.
    pub(crate) schedule: Option<Text>,
    pub(crate) timezone: Option<Text>,
    pub(crate) catch_up: Option<Text>,
    /// `concurrency`, `key`, `rate_limit`, `deadline` and the rest.
    pub(crate) flow: RawFlow,
}

/// A step, fan_out or gravestone, before validation.
pub(crate) struct RawEntry {
    pub(crate) kind: EntryKind,
    /// The method; `None` for a gravestone.
    pub(crate) method: Option<syn::Ident>,
    /// The gravestone's name; `None` for a live step.
    pub(crate) removed_name: Option<Text>,
    pub(crate) args: RawStepArgs,
    /// The checked signature; `None` when it was reported as wrong.
    pub(crate) signature: Option<StepSignature>,
}

/// The parts of a step method's signature the expansion needs.
pub(crate) struct StepSignature {
    /// The type of `cx`, spanned where the user wrote it.
    pub(crate) cx_ty: Type,
    /// The type of `fan`, for a fan_out.
    pub(crate) fan_ty: Option<Type>,
}

/// `#[step(...)]` or `#[fan_out(...)]` options, before validation.
#[derive(Default)]
pub(crate) struct RawStepArgs {
    pub(crate) name: Option<Text>,
    pub(crate) wait: Option<DurationMs>,
    pub(crate) timeout: Option<DurationMs>,
    pub(crate) skip_if: Option<PathArg>,
    pub(crate) queue: Option<Text>,
    pub(crate) priority: Option<Int>,
    pub(crate) wait_for: Option<RawWaitFor>,
    pub(crate) wait_timeout: Option<DurationMs>,
    pub(crate) on_timeout: Option<Word<OnTimeout>>,
    pub(crate) on_batch_failure: Option<Word<FailureAction>>,
    pub(crate) policies: Vec<RawPolicy>,
    /// `rate_limit = "N/period"`: starts of this step.
    pub(crate) rate_limit: Option<RateArg>,
    /// Every option written, valid or not: rules about a missing option stay
    /// quiet when it was written and already reported as bad.
    pub(crate) written: Vec<String>,
}

impl RawStepArgs {
    /// Whether the option was written at all, valid or not.
    pub(crate) fn wrote(&self, option: &str) -> bool {
        self.written.iter().any(|written| written == option)
    }
}

/// `wait_for = "name"` or `wait_for(name = "...", matches = path)`.
pub(crate) struct RawWaitFor {
    pub(crate) name: Text,
    pub(crate) matches: Option<PathArg>,
}

/// One `on_exception`, before validation.
pub(crate) struct RawPolicy {
    /// The `on_exception` keyword, where errors about the whole policy land.
    pub(crate) span: Span,
    pub(crate) matching: Vec<syn::Type>,
    pub(crate) action: Option<Word<ExceptionAction>>,
    pub(crate) handler: Option<PathArg>,
    pub(crate) wait: Option<(Span, DurationMs)>,
    pub(crate) max_reattempts: Option<(Span, Int)>,
    pub(crate) terminal_action: Option<(Span, Word<FailureAction>)>,
    pub(crate) report: Option<Word<Report>>,
    /// Some option of this policy was already reported (unknown, duplicate or a
    /// bad value): rules about missing options would only repeat it.
    pub(crate) reported: bool,
    /// `action` was written, valid or not.
    pub(crate) action_written: bool,
}

/// `crate`, `input` and `output` of `#[workflow(...)]`, each when it reads
/// well: what the stand-in for an impl that does not parse needs. Anything
/// wrong there is reported once the impl itself parses.
pub(crate) fn loose_workflow_args(
    args: proc_macro2::TokenStream,
) -> (Option<syn::Path>, Option<Type>, Option<Type>) {
    let mut ignored = Error::accumulator();
    let metas = list::read(args, options::Place::Workflow, &mut ignored);
    let (mut krate, mut input, mut output) = (None, None, None);
    for option in options::read(&metas, options::Place::Workflow, &mut ignored) {
        match option.name.as_str() {
            "crate" => krate = option.parse::<PathArg>(&mut ignored).map(|p| p.0),
            "input" => input = option.parse::<values::InputType>(&mut ignored).map(|t| t.0),
            "output" => {
                output = option
                    .parse::<values::OutputType>(&mut ignored)
                    .map(|t| t.0);
            }
            _ => {}
        }
    }
    // Dropped unread: these errors are found again by the full parse.
    drop(ignored.into_inner());
    (krate, input, output)
}

/// Where to point at generics: the first parameter, else the `where`.
pub(super) fn generics_span(generics: &syn::Generics) -> Span {
    generics.params.first().map_or_else(
        || {
            generics
                .where_clause
                .as_ref()
                .map_or_else(Span::call_site, |w| w.where_token.span)
        },
        Spanned::span,
    )
}

/// Runs `parse` with its own accumulator, moves its errors into `errors`, and says
/// whether there were any.
pub(super) fn nested<T>(
    errors: &mut Accumulator,
    parse: impl FnOnce(&mut Accumulator) -> T,
) -> (T, bool) {
    let mut local = Error::accumulator();
    let value = parse(&mut local);
    let found = local.into_inner();
    let reported = !found.is_empty();
    for error in found {
        errors.push(error);
    }
    (value, reported)
}
