//! The attribute macros of pgbus. Use them through `pgbus_runtime`, which
//! re-exports them and holds the types their expansions name.
//!
//! The options of each macro are documented on the macro. Every option error is a
//! spanned compile error, and all errors of one `impl` block are reported together.

mod expand;
mod model;
mod parse;
mod span;
mod validate;

use proc_macro::TokenStream;

/// Declares a durable workflow on an inherent `impl` block.
///
/// ```text
/// #[workflow(name = "orders.fulfil", input = Order, queue = "orders", priority = 0,
///            cancel_if = Self::is_void, on_exception(...))]
/// #[on_exception(matching(CardDeclined), action = "cancel", report = "never")]
/// impl Fulfil { #[step] async fn reserve(&self, cx: &mut StepCx<Order>) -> StepResult { .. } }
/// ```
///
/// Options, all optional:
/// - `name = "..."`: the durable workflow name, non-empty; default the type's name.
/// - `input = T`: the input type, `Serialize + DeserializeOwned + Send + 'static`;
///   default `()`. Also accepted as a string, `input = "Vec<Order>"`.
/// - `queue = "..."`: non-empty, no whitespace; default `"default"`.
/// - `priority = N`: fits `i16`; lower runs first; default 0.
/// - `cancel_if = path` (repeatable): a method `fn(&self, &StepCx<I>) -> bool` or
///   `-> Result<bool, E>`, evaluated before every attempt, OR-ed in order.
/// - `on_exception(...)` (repeatable, also as separate `#[on_exception(...)]`
///   attributes below `#[workflow]`): workflow-level policies, see [`macro@step`].
///
/// Inside the block, `#[step]` and `#[fan_out]` mark the steps in order,
/// `removed_step!(name);` keeps a gravestone for a step that was deleted, and
/// other methods are left alone. The expansion implements
/// `pgbus_runtime::Workflow` with a static definition and its digest.
#[proc_macro_attribute]
pub fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::workflow(args.into(), item.into()).into()
}

/// Marks a method of a `#[workflow]` impl as a step:
/// `async fn name(&self, cx: &mut StepCx<I>) -> R` where `R` is `StepResult`,
/// `Result<(), E>`, `Result<Flow, E>`, `Flow` or `()`.
///
/// Options, all optional:
/// - `name = "..."`: the durable step name; default the method name. Renaming the
///   method while keeping `name` keeps the durable name.
/// - `wait = "5s"`: delay after the previous step ends, `>= 0`.
/// - `timeout = "30s"`: stall horizon, `> 0`; default the runtime's threshold.
/// - `skip_if = path`: a guard like `cancel_if`; true skips the step.
/// - `queue`, `priority`: override the workflow's.
/// - `wait_for = "signal.name"` or `wait_for(name = "...", matches = path)`: wait
///   for a signal before the body runs; `matches` is
///   `fn(&self, &StepCx<I>, &Signal) -> bool` (or `Result<bool, E>`). The name
///   follows the rule `Client::signal` applies
///   (`pgbus_core::check_signal_name`): 1 to 255 characters, no control or
///   invisible formatting characters (zero-width spaces and joiners, direction
///   marks, the byte-order mark, soft hyphens), no whitespace at either end.
/// - `wait_timeout = "1h"`: `> 0`, needs `wait_for`.
/// - `on_timeout = "pause" | "cancel" | "skip" | "run"`: needs `wait_for` and
///   `wait_timeout`; default `pause`; a trailing `!` is accepted except on `run`.
/// - `on_exception(...)` (repeatable) or the shorthand `on_exception = "reattempt"`.
///
/// Durations are digits and units `ms`, `s`, `m`, `h`, `d`, largest first:
/// `250ms`, `1m30s`, `1d`.
///
/// `on_exception(matching(T1, T2), action = "...", wait = "15s", max_reattempts = 5,
/// terminal_action = "...", report = "...")` or `on_exception(handler = path)`:
/// - `matching`: error types checked by downcast; none means every error.
/// - `action`: `pause`, `reattempt`, `cancel` or `skip`; exactly one of `action`
///   and `handler`. A handler is `fn(&self, &StepCx<I>, &StepError) -> R` where `R`
///   is `Flow`, `Option<Flow>` or either in a `Result`.
/// - `wait` (default `1s`), `max_reattempts` (`> 0`, default 3) and
///   `terminal_action` (`pause`, `cancel` or `skip`, default `pause`) only with
///   `reattempt`: the body runs at most `max_reattempts + 1` times in a row.
/// - `report`: `always` (default), `never` or `terminal_only`.
///
/// Used outside a `#[workflow]` impl, it is a compile error.
#[proc_macro_attribute]
pub fn step(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("step", args.into(), &item.into()).into()
}

/// Marks a method of a `#[workflow]` impl as a fan_out step:
/// `async fn name(&self, cx: &mut StepCx<I>, fan: &mut FanOut) -> R`. The body
/// adds child runs with `fan.start::<W>(&input)`; the step waits until they end.
///
/// Options: those of [`macro@step`] except `wait_for`, `wait_timeout` and
/// `on_timeout`, plus `on_batch_failure = "pause" | "cancel" | "skip"` (default
/// `pause`): what to do when a child run is cancelled.
///
/// Used outside a `#[workflow]` impl, it is a compile error.
#[proc_macro_attribute]
pub fn fan_out(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("fan_out", args.into(), &item.into()).into()
}

/// A workflow-level exception policy, written below `#[workflow]` on the impl.
/// Its options are those of `on_exception(...)` in [`macro@step`].
///
/// Anywhere else (above `#[workflow]`, on a method, on another item) it is a
/// compile error.
#[proc_macro_attribute]
pub fn on_exception(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("on_exception", args.into(), &item.into()).into()
}

/// `removed_step!(name);` inside a `#[workflow]` impl keeps a gravestone for a
/// deleted step, in declaration order: runs still parked on it skip past it, and
/// the digest records it. The name is the durable step name, as an identifier or
/// a string. Outside a `#[workflow]` impl it is a compile error.
#[proc_macro]
pub fn removed_step(input: TokenStream) -> TokenStream {
    expand::stray_removed_step(input.into()).into()
}
