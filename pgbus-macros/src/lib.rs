//! The attribute macros of pgbus. Use them through `pgbus_runtime`, which
//! re-exports them and holds the types their expansions name.
//!
//! [`macro@workflow`] is the entry point: it reads the [`macro@step`],
//! [`macro@fan_out`] and [`macro@on_exception`] attributes and the
//! [`macro@removed_step`] gravestones of its impl. Each macro documents every
//! option it takes, with its values, default and rules, and the full signature of
//! every method an option names. Every option error is a spanned compile error,
//! and all errors of one `impl` block are reported together, in source order;
//! a suggested fix uses the user's own names and compiles once applied.

mod expand;
#[cfg(test)]
mod fuzz;
mod model;
mod parse;
mod render;
mod report;
mod span;
mod validate;

use proc_macro::TokenStream;

/// Declares a durable workflow on an inherent `impl` block.
///
/// ```ignore
/// use pgbus_runtime::prelude::*;
///
/// struct Fulfil;
///
/// #[workflow(name = "orders.fulfil", input = Order, queue = "orders", priority = 0,
///            cancel_if = Self::is_void, on_exception(matching(Timeout), action = "pause"))]
/// #[on_exception(matching(CardDeclined), action = "cancel", report = "never")]
/// impl Fulfil {
///     fn is_void(&self, cx: &StepCx<Order>) -> bool {
///         cx.input().void
///     }
///
///     #[step]
///     async fn reserve(&self, cx: &mut StepCx<Order>) -> StepResult {
///         Ok(Flow::Complete)
///     }
///
///     removed_step!(legacy_check);
///
///     #[step(wait_for = "payment.settled", wait_timeout = "1h", on_timeout = "cancel!")]
///     async fn ship(&self, cx: &mut StepCx<Order>) -> Result<(), ShipError> {
///         Ok(())
///     }
/// }
/// ```
///
/// # The impl
///
/// - An inherent impl (not `impl Trait for T`) of a named type (`impl Fulfil`, not
///   `impl dyn Trait`), with no generic parameters of any kind and no `where`
///   clause: the definition is static and the name durable. The type must be
///   `Send + Sync + 'static`, the bound of `pgbus_runtime::Workflow`.
/// - Its `#[step]` and `#[fan_out]` methods are the steps, in declaration order,
///   with `removed_step!(name);` gravestones among them. At least one live step
///   is needed; gravestones alone do not make a workflow. Other methods, consts
///   and types are left alone: guards, predicates and handlers are ordinary
///   methods of the impl.
/// - The macro reads and removes `#[step]`, `#[fan_out]`, `#[on_exception]` and
///   `removed_step!`, so they need no import inside the impl. It recognises them
///   written bare (as the prelude brings them), as `pgbus_runtime::step`,
///   `pgbus_macros::step` and so on, or through the path of the `crate`
///   option (`#[pgbus::step]` with `crate = "pgbus"`); any other path is not
///   read, and then fails as an attribute outside a workflow.
/// - `#[cfg(...)]` on a step or a gravestone, and `#[cfg_attr(..., step)]` on a
///   method (any `cfg_attr` there that names `step`, `fan_out`, `on_exception`
///   or `workflow`), are errors: attribute macros run before `cfg` applies, and
///   builds that disagree on the step list or its options disagree on the
///   digests of the same runs. A `cfg_attr` on the impl itself (say
///   `#[cfg_attr(test, on_exception(...))]` below `#[workflow]`) is applied by
///   the compiler before the macro sees the impl, so the macro cannot refuse
///   it: do not write one, for the same reason.
///   Keep the step and decide at run time with `skip_if`; for durations, queue,
///   priority or limits that differ per deployment, override them at
///   registration (`pgbus_runtime::Overrides`).
/// - `#[workflow]` is given once; `#[step]` or `#[fan_out]` on the impl itself is
///   an error.
///
/// The expansion is the impl, with the pgbus attributes and gravestones removed,
/// plus `impl pgbus_runtime::Workflow for Type` with `type Input = I`, `type
/// Output = R` and a
/// static `DEFINITION`: the name, queue, priority, guards, policies, the step
/// table with normalized options (durations in milliseconds), `digest` (SHA-256
/// over the `[name, kind]` pairs of the entries, gravestones included) and
/// `options_json` / `options_digest` (the normalized options and their SHA-256),
/// and, with `key`, `fn concurrency_key`.
/// Step methods get `#[allow(clippy::unused_async, clippy::unused_self,
/// clippy::unnecessary_wraps, clippy::trivially_copy_pass_by_ref)]`, and methods
/// named by `cancel_if`, `skip_if`, `matches`, `handler` or `key` (as `g`, `Self::g` or
/// `Fulfil::g`) the same without `unused_async`: the contract asks for those
/// shapes whether or not a body awaits, reads `self` or fails.
///
/// When an option is wrong, the expansion is the impl, every error found (in
/// source order; a duplicate name is reported where it is repeated, followed
/// by an error starting `note:` at the first place), and a
/// stand-in `Workflow` implementation with an empty definition (when the impl is
/// an inherent impl of a named, non-generic type), so that uses of the workflow
/// elsewhere do not fail as well. An impl that does not parse is handed back
/// without its pgbus attributes, so the compiler reports the syntax error alone.
///
/// # Options
///
/// All optional; each written `option = value` (or `on_exception(...)`), each at
/// most once except `cancel_if` and `on_exception`.
///
/// - `crate = "path"`: the path of the runtime crate, for a crate that depends
///   on it under another name, as serde's `#[serde(crate = "...")]`. A string
///   holding a path, or the path itself (`crate = pgbus`). Default
///   `::pgbus_runtime`. With
///   `pgbus = { package = "pgbus-runtime", ... }` in `Cargo.toml` (or
///   `extern crate pgbus_runtime as pgbus;`), write
///   `#[pgbus::workflow(crate = "pgbus")]`: the expansion then names only
///   `pgbus::...`. Inside the impl, `#[step]`, `#[fan_out]`,
///   `#[on_exception]` and `removed_step!` may be written bare or as
///   `#[pgbus::step]` and so on (see above).
/// - `name = "..."`: the durable workflow name, under which runs are stored. Not
///   empty, no control characters, no whitespace at either end. Default: the
///   last identifier of the type without `r#` (`impl r#Fulfil` is `"Fulfil"`).
/// - `input = T`: the run's input type, written as a type (`input = Order`,
///   `input = Vec<Order>`) or as a string holding one (`input = "Vec<Order>"`).
///   `T: Serialize + DeserializeOwned + Send + 'static`, checked at `T`; a
///   type with `impl Trait` or `_` in it is refused (as for `output`): the
///   run stores a type it can name. Default
///   `()`. Every step's `cx` is `&mut StepCx<T>`; a step that takes
///   `StepCx<Order>` while `input` is left out gets an error asking for
///   `input = Order`.
/// - `output = R`: the run's result type, written as `input` is (a type, or a
///   string holding one). `R: Serialize + DeserializeOwned + Send + 'static`,
///   checked at `R`. Default `()`. `Client::result::<W>(run)` (and the
///   testkit's `TestEnv::result`) waits for the run to end and decodes into
///   `R` the output (`cx.output(&value)`) of the attempt that finished it: the
///   last step's, or the one that returned `Flow::Finish`. A run whose last
///   attempt recorded no output (a skipped step) has `null` as its result,
///   which decodes as `()` or `Option`'s `None`; declare `output =
///   Option<R>` when the last step may be skipped. Declared, it is part of
///   `options_json` (not of the definition digest).
/// - `queue = "..."`: the queue the steps run on unless a step names its own.
///   Not empty, no whitespace or control characters anywhere. Default
///   `"default"`.
/// - `priority = N`: an integer literal, `-` allowed, no type suffix (`5`, `-1`,
///   not `5i16`), within `i16` (`-32768` to `32767`). Lower numbers run first.
///   Default `0`; a step may override it.
/// - `cancel_if = path` (repeatable; each method at most once): a guard, a
///   synchronous method of one of these shapes:
///
///   ```text
///   fn(&self, cx: &StepCx<I>) -> bool
///   fn(&self, cx: &StepCx<I>) -> Result<bool, E>
///   ```
///
///   `I` is the `input` type; `E: Into<StepError>`, that is any
///   `std::error::Error + Send + Sync + 'static`, or `StepError` itself. The
///   guards run each time any step is
///   claimed (a step woken by a signal or by its batch is claimed again), in the
///   order written, before the step's `skip_if`, its `wait_for` gate and its
///   body. The first that returns `true` cancels the run, with the reason
///   ``cancel_if `path` is true``: they are OR-ed. An `Err`, or a panic, is a step
///   error for the exception policies, the step's first.
/// - `on_exception(...)` (repeatable): a workflow-level exception policy, with
///   the options of [`macro@on_exception`]. Also written as separate
///   `#[on_exception(...)]` attributes below `#[workflow]`; the ones inside
///   `#[workflow(...)]` come first, then the attributes top to bottom. The
///   shorthand `on_exception = "..."` is for steps and is refused here.
/// - `concurrency`, `key`, `key_concurrency`, `slot`, `rate_limit`,
///   `key_rate_limit`, `deadline`, `on_deadline`: flow control, below.
///
/// An unknown option is an error with a did-you-mean (Jaro-Winkler similarity of at
/// least 0.8, or a word from another engine's vocabulary, such as `delay` for a
/// step's `wait`), else the list of allowed options. An option of another place
/// written here gets an error saying where it goes, with the option in the
/// fix: a step option (`wait`, `timeout`, `wait_for`, ...) onto the step, a
/// policy option (`action`, `matching`, `max_reattempts`, ...) into
/// `on_exception(...)` with the `action` a policy needs. A bare literal
/// (`#[workflow("x")]`) and `option(value)` for `option = value` are errors too.
///
/// Every option list (this one, `#[step(...)]`, `#[fan_out(...)]`,
/// `on_exception(...)`, `wait_for(...)`) has one grammar: items separated by
/// `,` (a trailing `,` is fine), each `name`, `name = value` (one expression;
/// for `input` and `output` one type, whose `<...>` may hold commas) or
/// `name(...)` in parentheses; `matching(...)` holds types separated by `,`.
/// A malformed item is an error spanned at its token, naming the option and
/// what it takes (`skip_if = ` alone: "`skip_if` needs a method path, e.g.
/// `skip_if = Self::opted_out`"): nothing or a second `=` after `=`, more than
/// one value, a missing `,` (both options named), `;` for `,`, `:` for `=`, a
/// leading or doubled `,`, a name that is a path or in quotes, `=` with no
/// name, `[...]` or `{...}` for `(...)`, `name(...) = value`, stray tokens.
/// Where it can, the fix is the user's own code corrected (`wait: "5s"` and
/// `wait = "5s" timeout = "1m"` get `wait = "5s"` and `wait = "5s", timeout =
/// "1m"`). The items after a malformed one are still read, so one build
/// reports every mistake of a list.
///
/// # Flow control
///
/// Limits every store's claim enforces fleet-wide, and a deadline for each run
/// (the runtime guide's "Flow control" tells how). Each value is checked at its
/// literal; a workflow that writes none has `FlowControl::NONE` and keeps its
/// options digest.
///
/// - `concurrency = N`: at most `N` slots of the workflow held at once. An
///   integer literal from 1 to 100000 (`pgbus_core::flow::MAX_CONCURRENCY`),
///   without quotes, sign or type suffix; `0` would never run a step and is
///   an error.
/// - `key = path`: the method giving a run's concurrency key, of the shape
///   `fn customer(input: &Order) -> impl Into<String>`: synchronous, no
///   receiver (the client calls it at start, where no workflow value
///   exists), one argument. Written as the method paths below (a bare
///   `customer` is `Self::customer`). A method of this impl of another shape
///   is an error at its signature; a missing method or a return type that is
///   not `Into<String>` is the compiler's error at the path. It becomes
///   `Workflow::concurrency_key`; a key given at start
///   (`StartOptions::concurrency_key`) wins. Needs `key_concurrency` or
///   `key_rate_limit`: `concurrency` and `rate_limit` count all runs together,
///   so a key alone would limit nothing.
/// - `key_concurrency = N`: at most `N` slots held at once per key, read as
///   `concurrency`. Allowed without `key`: starts give the key, and a run
///   started without one counts only against the workflow-wide limits.
/// - `slot = "step" | "run"`: what holds a slot. `"step"` (the default): a step
///   in progress, the slot given back when its attempt ends or parks, so a run
///   waiting between steps (a long `wait`, a signal) holds none. `"run"`: the
///   run's first claimed step takes it and the run keeps it until it finishes,
///   is cancelled or pauses, for "one run per customer at a time". Needs
///   `concurrency` or `key_concurrency`.
/// - `rate_limit = "N/period"`: at most `N` step starts of the workflow in any
///   window of `period`; `key_rate_limit = "N/period"`: per key (allowed without
///   `key`, as `key_concurrency`). A rate is `"<count>/<duration>"`, the count 1
///   to 1000, the period a duration (below) from `"1ms"` to `"1d"`: `"10/1s"`,
///   `"100/1m"`, `"5/250ms"`. Each part of a bad rate has its own error.
/// - `deadline = "2h"`: how long a run may take, from its start time (its `at`
///   or `delay`, else when it was started); a duration greater than zero. A
///   start may set its own (`StartOptions::deadline`, `deadline_after`), which
///   wins.
/// - `on_deadline = "cancel" | "pause"`: what a run past its deadline becomes:
///   cancelled with its fan-out children (the default), or paused for an
///   operator. Allowed without `deadline`, for a deadline a start gives.
///
/// `rate_limit` is a step option too; the rest written on a step is an error
/// saying they go here (and, for `deadline`, that a step's own bound is
/// `timeout`).
///
/// # Method paths
///
/// `cancel_if`, `skip_if`, `wait_for(matches = ...)` and `handler` take a path
/// to a method, written as a path or as a string holding one
/// (`cancel_if = "Self::is_void"`):
///
/// - a bare identifier names a method of the workflow: `skip_if = small` calls
///   `Self::small(self, cx)`;
/// - a longer path is called as written, with the workflow value first:
///   `Self::small`, `Fulfil::small`, or `crate::rules::small`, which is called as
///   `crate::rules::small(&workflow, cx)` and so has the shape
///   `fn(&Fulfil, &StepCx<I>) -> bool`.
///
/// A method that does not exist, or has another shape, is a compile error at the
/// path. Guards, signal predicates and handlers are synchronous (an `async fn`
/// returns a future, which is none of the accepted return types); they run on
/// the worker's async runtime outside the step's `timeout`, so they must be quick
/// and must not block. The options digest reads `g`, `Self::g` and `Fulfil::g` as
/// the same method.
///
/// # Flow words and the `!` spelling
///
/// The flow words are the string values that say what happens next:
///
/// - `action` of `on_exception(...)`, and the step shorthand
///   `on_exception = "..."`: `"pause"`, `"reattempt"`, `"cancel"`, `"skip"`;
/// - `terminal_action` of `on_exception(...)`: `"pause"`, `"cancel"`, `"skip"`;
/// - `on_batch_failure` of `#[fan_out]`: `"pause"`, `"cancel"`, `"skip"`;
/// - `on_timeout` of `#[step]`: `"pause"`, `"cancel"`, `"skip"`, `"run"`.
///
/// Only `on_timeout` takes the `!` spelling of the Ruby gem: `"pause!"`,
/// `"cancel!"` and `"skip!"` are the same words as `"pause"`, `"cancel"` and
/// `"skip"` and change nothing (the definition and `options_json`, hence
/// `options_digest`, hold the bare word). `"run!"` is refused, with a note that
/// the `!` spelling is accepted on `pause!`, `cancel!` and `skip!` only, and so
/// is a doubled `!!`.
/// Everywhere else a trailing `!` is an unknown value: `action = "cancel!"`,
/// `on_exception = "skip!"`, `terminal_action = "pause!"` and
/// `on_batch_failure = "cancel!"` are errors that list the allowed words and
/// suggest the bare one. The `report` values (`always`, `never`,
/// `terminal_only`) are not flow words and take no `!` either.
///
/// # Durations
///
/// `wait`, `timeout` and `wait_timeout` of a step, `wait` of a reattempt policy,
/// `deadline` and the period of a rate
/// are strings of one or more `<digits><unit>` parts, no spaces, units `d`, `h`,
/// `m`, `s`, `ms` from largest to smallest, each at most once: `"250ms"`,
/// `"5s"`, `"1m30s"`, `"1h30m"`, `"1d"`, `"0s"`. Refused, each with its own
/// error: an empty string, a bare number (`"5"`, or `5` unquoted), a sign
/// (`"-1s"`), a fraction (`"1.5s"`), an unknown or long unit (`"5x"`,
/// `"5sec"`), a repeated or out-of-order unit (`"5s1m"`), spaces, and anything
/// over `"36500d"` (about 100 years).
#[proc_macro_attribute]
pub fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::workflow(args.into(), item.into()).into()
}

/// Marks a method of a `#[workflow]` impl as a step.
///
/// ```text
/// async fn name(&self, cx: &mut StepCx<I>) -> R
/// ```
///
/// - `async`; not `unsafe`, `extern` or variadic (`const` is left to the
///   compiler, which refuses `const async fn`).
/// - The receiver is `&self` (or `self: &Self`): steps of one workflow value may
///   run at once. `&mut self`, `self` and `self: Box<Self>` are errors, as is a
///   missing receiver.
/// - One more argument, by `&mut`: `cx: &mut StepCx<I>`, where `I` is the
///   workflow's `input` (`()` without one). Any pattern may name it (`_cx`).
/// - Lifetime parameters are fine (`async fn a<'a>(&'a self, cx: &'a mut
///   StepCx<I>)`); type and const parameters and a `where` clause are errors.
/// - `R` is one of `StepResult` (that is `Result<Flow, StepError>`),
///   `Result<(), E>`, `Result<Flow, E>`, `Flow` or `()`, where
///   `E: Into<StepError>`: any `std::error::Error + Send + Sync + 'static`, or
///   `StepError` itself. `()` and `Ok(())` mean `Flow::Complete`; an `Err` goes
///   to the exception policies. Another `R` is an error at the method.
/// - The future is boxed as `Send`; a body that holds a non-`Send` value across
///   an `.await` is an error at the method.
/// - A method is either a `#[step]` or a `#[fan_out]`, once. `#[deprecated]` and
///   other attributes stay on the method.
///
/// # Options
///
/// All optional: `#[step]` alone is a step with the defaults. Written
/// `#[step(option = value, ...)]` (`#[step = ...]` is an error), each at most
/// once except `on_exception`. Durations are the strings described on
/// [`macro@workflow`] (`"250ms"`, `"1m30s"`, `"1d"`).
///
/// - `name = "..."`: the durable step name, which step rows, the digest and the
///   operator tools use. Not empty, no control characters, no whitespace at
///   either end. Default: the method name without `r#` (`async fn r#type` is
///   `"type"`). Unique among the live steps of the workflow, and not named by a
///   `removed_step!`. Renaming the method while keeping `name` keeps the durable
///   name and the digest; changing the durable name changes the digest.
/// - `wait = "5s"`: how long after the previous step ends this step is due (for
///   the first step, after the run starts). `"0s"` is allowed. Default `"0s"`.
/// - `timeout = "30s"`: greater than zero. It bounds the body: past it the body's
///   future is dropped and a `Timeout` error goes to the exception policies
///   (`on_exception(matching(Timeout), ...)`). It is also the attempt's stall
///   horizon, past which the sweep takes the attempt for stalled (a body that
///   blocks its thread never yields to the timer, so only the sweep catches it).
///   Default: no bound on the body, and the worker's stall threshold (5 minutes
///   unless the worker sets another) as the stall horizon.
/// - `skip_if = path`: a guard, a synchronous method (see the method paths on
///   [`macro@workflow`]) of one of these shapes:
///
///   ```text
///   fn(&self, cx: &StepCx<I>) -> bool
///   fn(&self, cx: &StepCx<I>) -> Result<bool, E>
///   ```
///
///   with `E: Into<StepError>`, as for `cancel_if`. It runs each time the step is
///   claimed, after the workflow's `cancel_if` and before the `wait_for` gate and
///   the body. `true` skips the step (with the reason ``skip_if `path` is true``):
///   the body does not run and the next step follows after its `wait`. An `Err`, or
///   a panic, is a step error for the exception policies.
/// - `queue = "..."`: the queue this step runs on. Not empty, no whitespace or
///   control characters. Default: the workflow's `queue`.
/// - `priority = N`: an integer literal within `i16`, `-` allowed, no type
///   suffix; lower runs first. Default: the workflow's `priority`.
/// - `wait_for = "signal.name"` or `wait_for(name = "signal.name", matches = path)`:
///   once due, the step waits for a signal of that name sent to its run
///   (`Client::signal`) before its body runs; the body reads the signal it
///   consumed with `cx.signal()` (an `Option<&Signal>`). Any unconsumed signal of
///   the name counts, including one sent before the step was reached. The name
///   follows the rule `Client::signal` applies
///   (`pgbus_core::check_signal_name`): 1 to 255 characters, no control
///   characters, no invisible formatting characters (`pgbus_core::is_invisible`:
///   zero-width spaces and joiners, direction marks, embeddings, overrides and
///   isolates, the byte-order mark, soft hyphens), no whitespace at either end.
///   The long form takes `name` (required) and `matches` (optional) and nothing
///   else.
///   - `matches = path`: a signal predicate, a synchronous method of one of
///     these shapes:
///
///     ```text
///     fn(&self, cx: &StepCx<I>, signal: &Signal) -> bool
///     fn(&self, cx: &StepCx<I>, signal: &Signal) -> Result<bool, E>
///     ```
///
///     with `E: Into<StepError>`. Unconsumed signals of the name are offered oldest
///     first; the first it accepts is consumed. Signals it turns down stay
///     unconsumed, so a later step waiting on the same name may take them. An
///     `Err`, or a panic, is a step error for the exception policies. Without
///     `matches`, the oldest unconsumed signal of the name is consumed. A later
///     attempt of the step (a reattempt, or the new attempt of a resume) gets the
///     signal an earlier attempt consumed, without asking `matches` again.
/// - `wait_timeout = "1h"`: greater than zero; needs `wait_for`. How long the
///   step waits for the signal, counted from when it first parked (reattempts of
///   the step do not restart the clock; an operator's resume does). Default: no
///   limit.
/// - `on_timeout = "pause" | "cancel" | "skip" | "run"`: needs `wait_for` and
///   `wait_timeout`. What happens when `wait_timeout` passes with no signal
///   consumed: `"pause"` pauses the run, `"cancel"` cancels it, `"skip"` skips
///   the step, each with a `WaitTimedOut` error on the step row that goes to no
///   policy and is not reported (it is the outcome the step asked for); `"run"`
///   runs the body with `cx.signal() == None`. `"pause!"`, `"cancel!"` and
///   `"skip!"` are accepted as the same words; `"run!"` is an error (see the
///   flow words on [`macro@workflow`]). Default `"pause"`.
/// - `on_exception(...)` (repeatable): a step-level exception policy, with the
///   options of [`macro@on_exception`]. Step policies are tried in the order
///   written, before the workflow's.
/// - `on_exception = "pause" | "reattempt" | "cancel" | "skip"`: the shorthand
///   for `on_exception(action = "...")`: no `matching`, so it answers every
///   error, and the defaults for the rest (`"reattempt"` waits `"1s"`,
///   reattempts 3 times, then pauses). No `!` spelling.
/// - `rate_limit = "N/period"`: at most `N` starts of this step in any window of
///   `period`, fleet-wide, as the workflow's `rate_limit` (see the flow control
///   on [`macro@workflow`]); both apply. A step over its rate is not failed: it
///   waits for the window, no attempt spent.
///
/// `on_batch_failure` belongs to `#[fan_out]` and is an error here. An unknown
/// option gets a did-you-mean or the list of allowed options; an option of
/// `on_exception(...)` written directly on the step (`max_reattempts = 3`), or
/// a workflow option (`cancel_if`), gets an error saying where it goes.
/// A malformed list (`skip_if = ` with no value, a missing `,`) gets the
/// errors described on [`macro@workflow`], at its tokens.
///
/// Used outside a `#[workflow]` impl (on a free function, or in an impl without
/// `#[workflow]`), it is a compile error.
#[proc_macro_attribute]
pub fn step(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("step", args.into(), &item.into()).into()
}

/// Marks a method of a `#[workflow]` impl as a fan_out step: a step whose body
/// starts child runs and which ends when they have all ended.
///
/// ```text
/// async fn name(&self, cx: &mut StepCx<I>, fan: &mut FanOut) -> R
/// ```
///
/// The method follows the rules of [`macro@step`] (`async`, `&self`, no type
/// parameters, a `Send` future), with a second argument `fan: &mut FanOut`, also
/// by `&mut`. `R` is one of `StepResult`, `Result<(), E>`, `Result<Flow, E>`,
/// `Flow` or `()`, where `E: Into<StepError>`.
///
/// The body adds children with `fan.start::<W>(&input)`, where `W` is any
/// workflow type and `input: W::Input`; it returns `Result<(), StepError>` (an
/// input that does not serialize, or holds a NUL character, is an `Err`). Some
/// worker must register `W`, or the children wait. When the body returns
/// `Flow::Complete` (`Ok(())`, `()`), the batch, its child runs and the step's
/// park are written in one transaction; the step then waits, without running the
/// body again, until every child has finished or been cancelled (a paused child
/// holds the batch open). All finished: the step completes. Any cancelled:
/// `on_batch_failure` applies. Any other verb, or an error, discards the
/// children; a body that starts none completes at once.
///
/// # Options
///
/// All optional, each at most once except `on_exception`:
///
/// - `name`, `wait`, `timeout`, `skip_if`, `queue`, `priority`, `rate_limit`,
///   `on_exception(...)` and the shorthand `on_exception = "..."`: as on
///   [`macro@step`], with the
///   same values, defaults and rules. `timeout` bounds the body, not the wait for
///   the children.
/// - `on_batch_failure = "pause" | "cancel" | "skip"`: what happens when the
///   batch resolves with at least one child run cancelled: `"pause"` pauses the
///   run, `"cancel"` cancels it, `"skip"` skips the step and goes on. It applies
///   directly, not through `on_exception`: the step row gets a `FanOutFailed`
///   error naming the counts, which is not reported. Default `"pause"`.
///   `"reattempt"` is an error; no `!` spelling. A resume or a reattempt after a
///   failed batch runs the body again and starts a fresh batch.
///
/// `wait_for`, `wait_timeout` and `on_timeout` are errors here: a fan_out waits
/// for its child runs, not for a signal; put the signal wait on a `#[step]`.
///
/// Used outside a `#[workflow]` impl, it is a compile error.
#[proc_macro_attribute]
pub fn fan_out(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("fan_out", args.into(), &item.into()).into()
}

/// A workflow-level exception policy, written below `#[workflow]` on the impl.
///
/// ```text
/// #[on_exception(matching(T1, T2), action = "reattempt", wait = "15s",
///                max_reattempts = 5, terminal_action = "cancel", report = "terminal_only")]
/// #[on_exception(matching(T3), handler = path, report = "never")]
/// #[on_exception(action = "pause")]
/// ```
///
/// The same options make every exception policy, wherever it is written:
///
/// - on the impl, as this attribute, below `#[workflow]` (the macro reads it
///   there; above `#[workflow]` it is expanded on its own and is an error);
/// - inside the workflow: `#[workflow(on_exception(...))]`;
/// - on a step: `#[step(on_exception(...))]` or `#[fan_out(on_exception(...))]`,
///   or the step shorthand `on_exception = "pause" | "reattempt" | "cancel" |
///   "skip"`.
///
/// `#[on_exception]` without options, `#[on_exception = ...]`, and
/// `#[on_exception(...)]` on a method (write it inside the step's attribute) or on
/// any other item are compile errors.
///
/// # Options
///
/// Each at most once; exactly one of `action` and `handler`.
///
/// - `matching(T1, T2, ...)`: the error types the policy answers. Any Rust type
///   (`CardDeclined`, `std::io::Error`, `my::Error<u8>`) with
///   `T: std::error::Error + 'static`, checked at `T`. An error matches when it is
///   one of them by downcast (`StepError::is::<T>()`) of the error the step
///   produced; its `source()` chain is not walked. At least one type; each type
///   once; not a reference (`&CardDeclined` is refused: a step's error is owned,
///   so it would never match). The runtime's own errors match too: `Timeout` (a body past its
///   `timeout`), `Panicked` (a panic in a body, guard, predicate or handler),
///   `BadInput` (a run input that does not deserialize). Left out: the policy
///   answers every error (a blanket policy).
/// - `action = "pause" | "reattempt" | "cancel" | "skip"`: `"pause"` pauses the
///   run until an operator resumes, skips or cancels it; `"reattempt"` runs the
///   step again as a new attempt after `wait`; `"cancel"` cancels the run;
///   `"skip"` skips the step and goes on with the next. No `!` spelling (see the
///   flow words on [`macro@workflow`]).
/// - `handler = path`: a method that picks the verb, synchronous (see the method
///   paths on [`macro@workflow`]), of one of these shapes:
///
///   ```text
///   fn(&self, cx: &StepCx<I>, error: &StepError) -> Flow
///   fn(&self, cx: &StepCx<I>, error: &StepError) -> Option<Flow>
///   fn(&self, cx: &StepCx<I>, error: &StepError) -> Result<Flow, E>
///   fn(&self, cx: &StepCx<I>, error: &StepError) -> Result<Option<Flow>, E>
///   ```
///
///   with `E: Into<StepError>` (any `std::error::Error + Send + Sync + 'static`, or
///   `StepError` itself). The returned `Flow` is the step's verb. `None` pauses the
///   run; an `Err`, or a panic, pauses it too, and the handler's error is recorded
///   and reported whatever `report` says (`report` governs the step's error). When
///   the run's input does not deserialize there is no `cx` to pass, so the handler
///   is not called and the run pauses.
/// - `wait = "1s"`: only with `action = "reattempt"`. The delay before the new
///   attempt, a duration (`"0s"` allowed). Default `"1s"`.
/// - `max_reattempts = N`: only with `action = "reattempt"`. An integer literal
///   from 1 to 4294967295 (`u32`), no type suffix. It counts the reattempts of the
///   step in a row (an operator's resume starts again from 0): the body runs at
///   most `N + 1` times in a row, then `terminal_action` applies. Default 3.
/// - `terminal_action = "pause" | "cancel" | "skip"`: only with
///   `action = "reattempt"`. What happens when `max_reattempts` is used up.
///   Default `"pause"`. `"reattempt"` is an error; no `!` spelling.
/// - `report = "always" | "never" | "terminal_only"`: whether a matched error is
///   reported (a `tracing` error event and the worker's error-report hook); the
///   step row keeps the error either way. `"always"` (the default) reports every
///   one; `"never"` none; `"terminal_only"` only when the policy gives up: the
///   `terminal_action` of a reattempt policy, or any action that is not a
///   reattempt (for those, and for a handler, it reports as `"always"`).
///
/// `wait`, `max_reattempts` and `terminal_action` with another action, or with
/// `handler`, are errors. A policy with neither `action` nor `handler` is an
/// error. An unknown option gets a did-you-mean (`retries` suggests
/// `max_reattempts`) or the list of allowed options; a step option written here
/// gets an error saying to write it on the step.
///
/// # Which policy answers
///
/// When a step fails (its body returns `Err`, runs past its `timeout` or panics;
/// a guard or a signal predicate fails; the run's input does not deserialize),
/// the first policy that matches decides:
///
/// 1. the step's policies, in the order written;
/// 2. then the workflow's policies that name types, in order (those inside
///    `#[workflow(...)]` first, then the `#[on_exception]` attributes top to
///    bottom);
/// 3. then the workflow's blanket policy;
/// 4. with none, the run pauses and the error is reported.
///
/// A policy that can never apply is a compile error: on a step, any policy after
/// a blanket one, or one whose types were all named by earlier policies; on the
/// workflow, a second blanket policy, or one whose types were all named by
/// earlier policies.
#[proc_macro_attribute]
pub fn on_exception(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::stray_attribute("on_exception", args.into(), &item.into()).into()
}

/// Keeps a gravestone for a deleted step, inside a `#[workflow]` impl.
///
/// ```text
/// removed_step!(legacy_check);
/// removed_step!("legacy.check");
/// ```
///
/// Written among the steps, at the place the deleted step had in declaration
/// order. It takes no options, only the step's durable name: one identifier
/// (without `r#`: `removed_step!(r#type)` is `"type"`) or one string literal for
/// a name that is not an identifier. Anything more (a second name, a
/// trailing `,`, `name = "..."`, a path) is an error at its token. The name is not empty, has no control
/// characters and no whitespace at either end.
///
/// - The name is not that of a live step (a step's durable name, so a step kept
///   under `name = "..."` counts by that name), and each name is removed once.
/// - A gravestone takes no attributes: `#[cfg(...)]` is refused as on a step,
///   and any other attribute too.
/// - Gravestones alone do not make a workflow: at least one live step is needed.
///
/// The gravestone is an entry of the definition with kind `removed`, so the
/// digest records it; a run whose next step is the removed one skips it, with the
/// reason ``step `name` was removed from the workflow``, and goes on.
///
/// Outside a `#[workflow]` impl it is a compile error.
#[proc_macro]
pub fn removed_step(input: TokenStream) -> TokenStream {
    expand::stray_removed_step(input.into()).into()
}
