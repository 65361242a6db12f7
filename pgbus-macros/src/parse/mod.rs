//! Stage one: syn tokens to raw, unvalidated options with their spans. This is
//! the only stage that reads syn's item tree; it also strips the pgbus
//! attributes and `removed_step!` invocations from the impl so the cleaned impl
//! can be emitted whatever happens next.

mod options;
pub(crate) mod values;

use darling::Error;
use darling::ast::NestedMeta;
use darling::error::Accumulator;
use pgbus_core::{EntryKind, ExceptionAction, FailureAction, OnTimeout, Report};
use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ImplItem, ImplItemFn, ItemImpl, Meta, ReceiverKind, Type};

use options::{OptionItem, Place};
use values::{DurationMs, InputType, Int, Matching, PathArg, Text, Word};

/// `#[workflow(...)]` and the impl it sits on, before validation.
pub(crate) struct RawWorkflow {
    pub(crate) name: Option<Text>,
    pub(crate) input: Option<Type>,
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

/// Parses `#[workflow(args)]` on `item`, strips every pgbus attribute and
/// `removed_step!` from `item`, and reports what it can on the way.
pub(crate) fn workflow(
    args: TokenStream,
    item: &mut ItemImpl,
    errors: &mut Accumulator,
) -> RawWorkflow {
    check_impl_shape(item, errors);

    let type_ident = match &*item.self_ty {
        Type::Path(path) if path.qself.is_none() => {
            path.path.segments.last().map(|s| s.ident.clone())
        }
        _ => None,
    };

    let mut raw = RawWorkflow {
        name: None,
        input: None,
        queue: None,
        priority: None,
        cancel_if: Vec::new(),
        policies: Vec::new(),
        entries: Vec::new(),
        self_ty: (*item.self_ty).clone(),
        type_ident,
        krate: None,
        input_written: false,
    };

    let metas = errors
        .handle(NestedMeta::parse_meta_list(args).map_err(Error::from))
        .unwrap_or_default();
    for option in options::read(&metas, Place::Workflow, errors) {
        match option.name.as_str() {
            "name" => raw.name = option.parse(errors),
            "input" => {
                raw.input_written = true;
                raw.input = option.parse::<InputType>(errors).map(|t| t.0);
            }
            "queue" => raw.queue = option.parse(errors),
            "priority" => raw.priority = option.parse(errors),
            "cancel_if" => raw
                .cancel_if
                .extend(option.parse::<PathArg>(errors).map(|p| p.0)),
            "on_exception" if option.list().is_none() => errors.push(
                Error::custom(
                    "the `on_exception = \"...\"` shorthand is for steps; on `#[workflow]` write \
                     `on_exception(action = \"...\")`",
                )
                .with_span(&option.name_span()),
            ),
            "on_exception" => raw.policies.extend(policy(&option, errors)),
            "crate" => raw.krate = option.parse::<PathArg>(errors).map(|p| p.0),
            _ => {}
        }
    }

    // `#[step]` and the rest may be written through a renamed crate too.
    let ours = Ours::new(raw.krate.as_ref());

    // Attributes written below `#[workflow]` on the impl itself.
    let impl_attrs = std::mem::take(&mut item.attrs);
    for attr in impl_attrs {
        if ours.is(&attr, "on_exception") {
            raw.policies.extend(policy_attribute(&attr, errors));
        } else if ours.is(&attr, "step") || ours.is(&attr, "fan_out") {
            errors.push(
                Error::custom("`#[step]` and `#[fan_out]` go on methods inside the `#[workflow]` impl, not on the impl")
                    .with_span(attr.path()),
            );
        } else if ours.is(&attr, "workflow") {
            errors.push(
                Error::custom("duplicate `#[workflow]` attribute; give it once")
                    .with_span(attr.path()),
            );
        } else {
            item.attrs.push(attr);
        }
    }

    let items = std::mem::take(&mut item.items);
    for impl_item in items {
        match impl_item {
            ImplItem::Fn(mut method) => {
                if let Some(entry) = step_method(&mut method, &ours, errors) {
                    raw.entries.push(entry);
                }
                item.items.push(ImplItem::Fn(method));
            }
            ImplItem::Macro(mac) if ours.is_path(&mac.mac.path, "removed_step") => {
                raw.entries.extend(gravestone(&mac, errors));
            }
            mut other => {
                if let Some(attrs) = item_attrs_mut(&mut other) {
                    strip_stray(attrs, &ours, errors, "a method");
                }
                item.items.push(other);
            }
        }
    }
    allow_contract_lints(item, &raw);
    raw
}

/// Step methods must be `async fn(&self, ...)` and guards and handlers take
/// `&self` and may return `Result`, whether or not a body awaits, reads `self` or
/// fails: silence the pedantic clippy lints that would flag the contract itself.
fn allow_contract_lints(item: &mut ItemImpl, raw: &RawWorkflow) {
    let mut referenced: Vec<&syn::Path> = raw.cancel_if.iter().collect();
    for entry in &raw.entries {
        referenced.extend(entry.args.skip_if.as_ref().map(|p| &p.0));
        referenced.extend(
            entry
                .args
                .wait_for
                .as_ref()
                .and_then(|w| w.matches.as_ref())
                .map(|p| &p.0),
        );
        referenced.extend(
            entry
                .args
                .policies
                .iter()
                .filter_map(|p| p.handler.as_ref())
                .map(|p| &p.0),
        );
    }
    referenced.extend(
        raw.policies
            .iter()
            .filter_map(|p| p.handler.as_ref())
            .map(|p| &p.0),
    );
    // `g`, `Self::g` and `Fulfil::g` all name a method of this impl.
    let names_method = |ident: &syn::Ident| {
        referenced.iter().any(|path| {
            path.get_ident() == Some(ident)
                || (path.segments.len() == 2
                    && (path.segments[0].ident == "Self"
                        || raw.type_ident.as_ref() == Some(&path.segments[0].ident))
                    && path.segments[1].ident == *ident)
        })
    };
    for impl_item in &mut item.items {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let is_step = raw
            .entries
            .iter()
            .any(|e| e.method.as_ref() == Some(&method.sig.ident));
        if is_step {
            method.attrs.push(syn::parse_quote!(
                #[allow(
                    clippy::unused_async,
                    clippy::unused_self,
                    clippy::unnecessary_wraps,
                    clippy::trivially_copy_pass_by_ref
                )]
            ));
        } else if names_method(&method.sig.ident) {
            method.attrs.push(syn::parse_quote!(
                #[allow(
                    clippy::unused_self,
                    clippy::unnecessary_wraps,
                    clippy::trivially_copy_pass_by_ref
                )]
            ));
        }
    }
}

fn check_impl_shape(item: &ItemImpl, errors: &mut Accumulator) {
    if let Some((path, _)) = &item.trait_ {
        errors.push(
            Error::custom(
                "`#[workflow]` goes on an inherent impl (`impl Fulfil { ... }`), not on a trait impl; \
                 the macro implements the `Workflow` trait itself",
            )
            .with_span(path),
        );
    }
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.push(
            Error::custom(
                "a workflow cannot be generic: its definition is static and its name is durable; \
                 implement it on a concrete type",
            )
            .with_span(&generics_span(&item.generics)),
        );
    }
    if !matches!(&*item.self_ty, Type::Path(path) if path.qself.is_none()) {
        errors.push(
            Error::custom("`#[workflow]` needs a named type, e.g. `impl Fulfil { ... }`")
                .with_span(&item.self_ty),
        );
    }
}

/// Handles one method: strips our attributes and, when it is a step, parses it.
fn step_method(method: &mut ImplItemFn, ours: &Ours, errors: &mut Accumulator) -> Option<RawEntry> {
    let attrs = std::mem::take(&mut method.attrs);
    let mut marker: Option<(EntryKind, Attribute)> = None;
    for attr in attrs {
        let kind = if ours.is(&attr, "step") {
            EntryKind::Step
        } else if ours.is(&attr, "fan_out") {
            EntryKind::FanOut
        } else if ours.is(&attr, "on_exception") {
            errors.push(
                Error::custom(
                    "write a step's policies inside its attribute, e.g. `#[step(on_exception(...))]`; \
                     a separate `#[on_exception]` belongs on the impl, below `#[workflow]`",
                )
                .with_span(attr.path()),
            );
            continue;
        } else if ours.is(&attr, "workflow") {
            errors.push(
                Error::custom("`#[workflow]` goes on the impl block, not on a method")
                    .with_span(attr.path()),
            );
            continue;
        } else if attr.path().is_ident("cfg_attr") && mentions_ours(&attr) {
            errors.push(conditional_step(&attr));
            continue;
        } else {
            method.attrs.push(attr);
            continue;
        };
        if let Some((first, _)) = &marker {
            let message = if *first == kind {
                format!(
                    "duplicate `#[{}]` on one method; give it once",
                    attribute_name(kind)
                )
            } else {
                "a method is either a `#[step]` or a `#[fan_out]`, not both".to_owned()
            };
            errors.push(Error::custom(message).with_span(attr.path()));
            continue;
        }
        marker = Some((kind, attr));
    }

    let (kind, attr) = marker?;
    for attr in &method.attrs {
        if attr.path().is_ident("cfg") {
            errors.push(conditional_step(attr));
        }
    }
    let place = if kind == EntryKind::FanOut {
        Place::FanOut
    } else {
        Place::Step
    };
    let args = step_args(&attr, place, errors);
    let signature = check_signature(method, kind, errors);
    Some(RawEntry {
        kind,
        method: Some(method.sig.ident.clone()),
        removed_name: None,
        args,
        signature,
    })
}

fn attribute_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::FanOut => "fan_out",
        EntryKind::Step | EntryKind::Removed => "step",
    }
}

fn step_args(attr: &Attribute, place: Place, errors: &mut Accumulator) -> RawStepArgs {
    let mut args = RawStepArgs::default();
    let metas = match &attr.meta {
        Meta::Path(_) => return args,
        Meta::List(list) => errors
            .handle(NestedMeta::parse_meta_list(list.tokens.clone()).map_err(Error::from))
            .unwrap_or_default(),
        Meta::NameValue(nv) => {
            errors.push(
                Error::custom("write step options in parentheses, e.g. `#[step(wait = \"5s\")]`")
                    .with_span(&nv.eq_token),
            );
            return args;
        }
    };
    for option in options::read(&metas, place, errors) {
        args.written.push(option.name.clone());
        match option.name.as_str() {
            "name" => args.name = option.parse(errors),
            "wait" => args.wait = option.parse(errors),
            "timeout" => args.timeout = option.parse(errors),
            "skip_if" => args.skip_if = option.parse(errors),
            "queue" => args.queue = option.parse(errors),
            "priority" => args.priority = option.parse(errors),
            "wait_for" => args.wait_for = wait_for(&option, errors),
            "wait_timeout" => args.wait_timeout = option.parse(errors),
            "on_timeout" => args.on_timeout = option.parse(errors),
            "on_batch_failure" => args.on_batch_failure = option.parse(errors),
            "on_exception" => args.policies.extend(policy(&option, errors)),
            _ => {}
        }
    }
    args
}

fn wait_for(option: &OptionItem<'_>, errors: &mut Accumulator) -> Option<RawWaitFor> {
    let Some(list) = option.list() else {
        // `wait_for = "name"`
        return option.parse::<Text>(errors).map(|name| RawWaitFor {
            name,
            matches: None,
        });
    };
    let metas =
        errors.handle(NestedMeta::parse_meta_list(list.tokens.clone()).map_err(Error::from))?;
    let ((name, matches), reported) = nested(errors, |errors| {
        let mut name = None;
        let mut matches = None;
        for inner in options::read(&metas, Place::WaitFor, errors) {
            match inner.name.as_str() {
                "name" => name = inner.parse::<Text>(errors),
                "matches" => matches = inner.parse::<PathArg>(errors),
                _ => {}
            }
        }
        (name, matches)
    });
    if name.is_none() && !reported {
        errors.push(
            Error::custom("`wait_for(...)` needs the signal's name, e.g. `wait_for(name = \"payment.settled\")`")
                .with_span(&list.path),
        );
    }
    name.map(|name| RawWaitFor { name, matches })
}

/// `on_exception(...)` or the shorthand `on_exception = "reattempt"` inside an
/// option list.
fn policy(option: &OptionItem<'_>, errors: &mut Accumulator) -> Option<RawPolicy> {
    let span = option.name_span();
    match option.list() {
        Some(list) => {
            let metas = errors
                .handle(NestedMeta::parse_meta_list(list.tokens.clone()).map_err(Error::from))?;
            Some(policy_options(span, &metas, errors))
        }
        None => {
            let action = option.parse::<Word<ExceptionAction>>(errors)?;
            Some(RawPolicy {
                span,
                matching: Vec::new(),
                action: Some(action),
                handler: None,
                wait: None,
                max_reattempts: None,
                terminal_action: None,
                report: None,
                reported: false,
                action_written: true,
            })
        }
    }
}

/// A separate `#[on_exception(...)]` attribute on the impl.
fn policy_attribute(attr: &Attribute, errors: &mut Accumulator) -> Option<RawPolicy> {
    let span = attr.path().span();
    match &attr.meta {
        Meta::List(list) => {
            let metas = errors
                .handle(NestedMeta::parse_meta_list(list.tokens.clone()).map_err(Error::from))?;
            Some(policy_options(span, &metas, errors))
        }
        Meta::Path(_) | Meta::NameValue(_) => {
            errors.push(
                Error::custom(
                    "`#[on_exception]` needs options, e.g. `#[on_exception(matching(CardDeclined), action = \"cancel\")]`",
                )
                .with_span(attr),
            );
            None
        }
    }
}

fn policy_options(span: Span, metas: &[NestedMeta], errors: &mut Accumulator) -> RawPolicy {
    let mut policy = RawPolicy {
        span,
        matching: Vec::new(),
        action: None,
        handler: None,
        wait: None,
        max_reattempts: None,
        terminal_action: None,
        report: None,
        reported: false,
        action_written: false,
    };
    let ((), reported) = nested(errors, |errors| {
        for option in options::read(metas, Place::OnException, errors) {
            let name_span = option.name_span();
            match option.name.as_str() {
                "matching" => {
                    policy.matching = option
                        .parse::<Matching>(errors)
                        .map(|m| m.0)
                        .unwrap_or_default();
                }
                "action" => {
                    policy.action_written = true;
                    policy.action = option.parse(errors);
                }
                "handler" => policy.handler = option.parse(errors),
                "wait" => policy.wait = option.parse(errors).map(|v| (name_span, v)),
                "max_reattempts" => {
                    policy.max_reattempts = option.parse(errors).map(|v| (name_span, v));
                }
                "terminal_action" => {
                    policy.terminal_action = option.parse(errors).map(|v| (name_span, v));
                }
                "report" => policy.report = option.parse(errors),
                _ => {}
            }
        }
    });
    policy.reported = reported;
    policy
}

/// `#[cfg]` on a step: attribute macros run before `cfg` is applied, and a step
/// list that differs between builds would give runs started by one build a digest
/// the other does not know.
fn conditional_step(attr: &Attribute) -> Error {
    Error::custom(
        "a step cannot be conditional: `#[cfg]` would give builds different step lists and \
         digests; keep the step and decide at run time with `skip_if`",
    )
    .with_span(attr.path())
}

/// Whether a `#[cfg_attr(...)]` would add one of our attributes.
fn mentions_ours(attr: &Attribute) -> bool {
    let Meta::List(list) = &attr.meta else {
        return false;
    };
    list.tokens.clone().into_iter().any(|tree| {
        matches!(&tree, proc_macro2::TokenTree::Ident(ident)
            if ["step", "fan_out", "on_exception", "workflow"].iter().any(|name| ident == name))
    })
}

/// Where to point at generics: the first parameter, else the `where`.
fn generics_span(generics: &syn::Generics) -> Span {
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
fn nested<T>(errors: &mut Accumulator, parse: impl FnOnce(&mut Accumulator) -> T) -> (T, bool) {
    let mut local = Error::accumulator();
    let value = parse(&mut local);
    let found = local.into_inner();
    let reported = !found.is_empty();
    for error in found {
        errors.push(error);
    }
    (value, reported)
}

/// Checks `async fn name(&self, cx: &mut StepCx<I>)` (plus `fan: &mut FanOut` for a
/// fan_out) and returns the argument types.
fn check_signature(
    method: &ImplItemFn,
    kind: EntryKind,
    errors: &mut Accumulator,
) -> Option<StepSignature> {
    let sig = &method.sig;
    let attr = attribute_name(kind);
    let shape = if kind == EntryKind::FanOut {
        "`async fn name(&self, cx: &mut StepCx<I>, fan: &mut FanOut)`"
    } else {
        "`async fn name(&self, cx: &mut StepCx<I>)`"
    };
    let mut ok = check_modifiers(sig, attr, shape, errors);

    let mut inputs = sig.inputs.iter();
    match check_receiver(inputs.next(), sig, attr, shape, errors) {
        None => return None,
        Some(receiver_ok) => ok &= receiver_ok,
    }

    let typed: Vec<&syn::PatType> = inputs
        .filter_map(|arg| match arg {
            FnArg::Typed(arg) => Some(arg),
            FnArg::Receiver(_) => None,
        })
        .collect();
    let wanted = if kind == EntryKind::FanOut { 2 } else { 1 };
    if typed.len() != wanted {
        let span = typed
            .get(wanted)
            .map_or_else(|| sig.ident.span(), Spanned::span);
        let message = if typed.len() < wanted {
            format!("this `#[{attr}]` method is missing an argument; write {shape}")
        } else {
            format!("this `#[{attr}]` method has too many arguments; write {shape}")
        };
        errors.push(Error::custom(message).with_span(&span));
        return None;
    }

    let mut types = Vec::new();
    for (index, arg) in typed.iter().enumerate() {
        let what = if index == 0 {
            "the step context as `cx: &mut StepCx<I>`"
        } else {
            "the batch as `fan: &mut FanOut`"
        };
        match &*arg.ty {
            Type::Reference(reference) if reference.mutability.is_some() => {
                types.push((*arg.ty).clone());
            }
            other => {
                errors.push(
                    Error::custom(format!("a `#[{attr}]` method takes {what}, by `&mut`"))
                        .with_span(other),
                );
                ok = false;
            }
        }
    }

    if !ok {
        return None;
    }
    let mut types = types.into_iter();
    let cx_ty = types.next()?;
    Some(StepSignature {
        cx_ty,
        fan_ty: types.next(),
    })
}

/// `async`, not `unsafe`/`extern`, no type parameters, not variadic; reports
/// each and says whether all held.
fn check_modifiers(
    sig: &syn::Signature,
    attr: &str,
    shape: &str,
    errors: &mut Accumulator,
) -> bool {
    let mut ok = true;
    if sig.asyncness.is_none() {
        errors.push(
            Error::custom(format!(
                "a `#[{attr}]` method must be `async`; write {shape}"
            ))
            .with_span(&sig.fn_token),
        );
        ok = false;
    }
    // `const` is left to the compiler, which refuses `const async fn` itself.
    let unsafe_or_extern = match (&sig.safety, &sig.abi) {
        (syn::Safety::Unsafe(token), _) => Some(token.span),
        (_, Some(abi)) => Some(abi.extern_token.span),
        _ => None,
    };
    if let Some(span) = unsafe_or_extern {
        errors.push(
            Error::custom(format!(
                "a `#[{attr}]` method cannot be `unsafe` or `extern`; write {shape}"
            ))
            .with_span(&span),
        );
        ok = false;
    }
    // Lifetime parameters are fine (`async fn a<'a>(&'a self, ...)`): the call site
    // infers them. Type and const parameters are not.
    let generic = sig
        .generics
        .params
        .iter()
        .any(|param| !matches!(param, syn::GenericParam::Lifetime(_)));
    if generic || sig.generics.where_clause.is_some() {
        errors.push(
            Error::custom(format!(
                "a `#[{attr}]` method cannot be generic; the engine calls it with the workflow's input type"
            ))
            .with_span(&generics_span(&sig.generics)),
        );
        ok = false;
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(Error::custom("a step method cannot be variadic").with_span(variadic));
        ok = false;
    }
    ok
}

/// `Some(true)` for `&self`; `Some(false)` for a wrong receiver (reported); `None`
/// when there is no receiver at all (reported; the rest cannot be checked).
fn check_receiver(
    first: Option<&FnArg>,
    sig: &syn::Signature,
    attr: &str,
    shape: &str,
    errors: &mut Accumulator,
) -> Option<bool> {
    match first {
        Some(FnArg::Receiver(receiver)) => {
            let by_shared_ref = receiver.mutability.is_none()
                && match &receiver.kind {
                    ReceiverKind::Reference(_, _, None) => true,
                    ReceiverKind::Typed(_, ty) => matches!(&**ty,
                        Type::Reference(r) if r.mutability.is_none()
                            && matches!(&*r.elem, Type::Path(p) if p.path.is_ident("Self"))),
                    _ => false,
                };
            if !by_shared_ref {
                errors.push(
                    Error::custom(format!(
                        "a `#[{attr}]` method takes `&self`: steps of one workflow value may run at once; \
                         write {shape}"
                    ))
                    .with_span(&receiver.self_token),
                );
            }
            Some(by_shared_ref)
        }
        Some(FnArg::Typed(arg)) => {
            errors.push(
                Error::custom(format!(
                    "a `#[{attr}]` method takes `&self` first; write {shape}"
                ))
                .with_span(arg),
            );
            None
        }
        None => {
            errors.push(
                Error::custom(format!(
                    "a `#[{attr}]` method takes `&self` and the step context; write {shape}"
                ))
                .with_span(&sig.ident),
            );
            None
        }
    }
}

/// `removed_step!(name)` or `removed_step!("durable.name")`.
fn gravestone(mac: &syn::ImplItemMacro, errors: &mut Accumulator) -> Option<RawEntry> {
    let name = match syn::parse2::<GravestoneName>(mac.mac.tokens.clone()) {
        Ok(name) => name.0,
        Err(error) => {
            // syn's error knows the token where the name stopped making sense; an
            // empty invocation has none, so blame the macro's name.
            let span = if mac.mac.tokens.is_empty() {
                mac.mac.path.span()
            } else {
                error.span()
            };
            errors.push(
                Error::custom(
                    "`removed_step!` takes the removed step's durable name, e.g. `removed_step!(legacy_check)` \
                     or `removed_step!(\"legacy.check\")`",
                )
                .with_span(&span),
            );
            return None;
        }
    };
    for attr in &mac.attrs {
        if attr.path().is_ident("cfg") {
            errors.push(conditional_step(attr));
        } else {
            errors
                .push(Error::custom("`removed_step!` takes no attributes").with_span(attr.path()));
        }
    }
    Some(RawEntry {
        kind: EntryKind::Removed,
        method: None,
        removed_name: Some(name),
        args: RawStepArgs::default(),
        signature: None,
    })
}

struct GravestoneName(Text);

impl syn::parse::Parse for GravestoneName {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let text = if input.peek(syn::LitStr) {
            let lit: syn::LitStr = input.parse()?;
            Text {
                value: lit.value(),
                span: lit.span(),
            }
        } else {
            let ident: syn::Ident = input.parse()?;
            Text {
                value: syn::ext::IdentExt::unraw(&ident).to_string(),
                span: ident.span(),
            }
        };
        if !input.is_empty() {
            return Err(input.error("expected one name"));
        }
        Ok(Self(text))
    }
}

/// How our attributes and `removed_step!` may be written inside the impl:
/// bare (`#[step]`), through `pgbus_runtime::` or `pgbus_macros::`, or through
/// the path the workflow's `crate = "..."` option names (`#[pgbus::step]` for
/// a dependency renamed to `pgbus`).
pub(crate) struct Ours {
    /// The `crate` option's segments, without a leading `::`.
    krate: Option<Vec<String>>,
}

impl Ours {
    pub(crate) fn new(krate: Option<&syn::Path>) -> Self {
        Self {
            krate: krate.map(|path| {
                path.segments
                    .iter()
                    .map(|segment| segment.ident.to_string())
                    .collect()
            }),
        }
    }

    /// Whether `attr` is ours and named `name`.
    pub(crate) fn is(&self, attr: &Attribute, name: &str) -> bool {
        self.is_path(attr.path(), name)
    }

    /// Whether `path` names our `name`.
    pub(crate) fn is_path(&self, path: &syn::Path, name: &str) -> bool {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.is_words(&segments, name)
    }

    /// Whether the words of a path (`["pgbus", "step"]`) name our `name`.
    pub(crate) fn is_words(&self, segments: &[String], name: &str) -> bool {
        let Some((last, prefix)) = segments.split_last() else {
            return false;
        };
        if last != name {
            return false;
        }
        match prefix {
            [] => true,
            [krate] if matches!(krate.as_str(), "pgbus_runtime" | "pgbus_macros") => true,
            _ => self.krate.as_deref() == Some(prefix),
        }
    }
}

/// Strips pgbus attributes from a non-method impl item, reporting each.
fn strip_stray(attrs: &mut Vec<Attribute>, ours: &Ours, errors: &mut Accumulator, expected: &str) {
    attrs.retain(|attr| {
        let ours = ["step", "fan_out", "on_exception", "workflow"]
            .iter()
            .any(|name| ours.is(attr, name));
        if ours {
            let name = attr
                .path()
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            let message = match name.as_str() {
                "on_exception" => {
                    "`#[on_exception]` goes on the `#[workflow]` impl, below `#[workflow]`, \
                                   or inside a step as `#[step(on_exception(...))]`"
                        .to_owned()
                }
                "workflow" => "`#[workflow]` goes on the impl block".to_owned(),
                _ => format!("`#[{name}]` only goes on {expected} of the `#[workflow]` impl"),
            };
            errors.push(Error::custom(message).with_span(attr.path()));
        }
        !ours
    });
}

fn item_attrs_mut(item: &mut ImplItem) -> Option<&mut Vec<Attribute>> {
    match item {
        ImplItem::Const(c) => Some(&mut c.attrs),
        ImplItem::Type(t) => Some(&mut t.attrs),
        ImplItem::Macro(m) => Some(&mut m.attrs),
        ImplItem::Fn(f) => Some(&mut f.attrs),
        _ => None,
    }
}
