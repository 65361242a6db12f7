//! `#[step(...)]` and `#[fan_out(...)]` on a method: the marker attribute, its
//! options and `wait_for`.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::EntryKind;
use syn::{Attribute, ImplItemFn, Meta};

use super::on_exception::policy;
use super::options::{self, OptionItem, Place};
use super::ours::Ours;
use super::signature::check_signature;
use super::values::{PathArg, Text};
use super::{RawEntry, RawStepArgs, RawWaitFor, conditional, list, nested};
use crate::render::code;

/// Handles one method: strips our attributes and, when it is a step, parses it.
pub(super) fn step_method(
    method: &mut ImplItemFn,
    ours: &Ours,
    input: Option<&syn::Type>,
    errors: &mut Accumulator,
) -> Option<RawEntry> {
    let attrs = std::mem::take(&mut method.attrs);
    let mut marker: Option<(EntryKind, Attribute)> = None;
    // Reported once the marker is known: the fix depends on it.
    let mut policies = Vec::new();
    let mut conditional = Vec::new();
    for attr in attrs {
        let kind = if ours.is(&attr, "step") {
            EntryKind::Step
        } else if ours.is(&attr, "fan_out") {
            EntryKind::FanOut
        } else if ours.is(&attr, "on_exception") {
            policies.push(attr);
            continue;
        } else if ours.is(&attr, "workflow") {
            errors.push(
                Error::custom("`#[workflow]` goes on the impl block, not on a method")
                    .with_span(attr.path()),
            );
            continue;
        } else if attr.path().is_ident("cfg_attr") && conditional::mentions_ours(&attr) {
            conditional.push(attr);
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

    let marked = marker.as_ref().map(|(_, attr)| attr);
    for policy in &policies {
        errors.push(policy_on_method(policy, marked));
    }
    for attr in &conditional {
        errors.push(conditional::cfg_attr(attr, &method.sig.ident, marked, ours));
    }
    let (kind, attr) = marker?;
    for attr in &method.attrs {
        if attr.path().is_ident("cfg") {
            errors.push(conditional::cfg(attr));
        }
    }
    let place = if kind == EntryKind::FanOut {
        Place::FanOut
    } else {
        Place::Step
    };
    let args = step_args(&attr, place, errors);
    let signature = check_signature(method, kind, input, errors);
    Some(RawEntry {
        kind,
        method: Some(method.sig.ident.clone()),
        removed_name: None,
        args,
        signature,
    })
}

pub(super) fn attribute_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::FanOut => "fan_out",
        EntryKind::Step | EntryKind::Removed => "step",
    }
}

fn step_args(attr: &Attribute, place: Place, errors: &mut Accumulator) -> RawStepArgs {
    let mut args = RawStepArgs::default();
    let metas = match &attr.meta {
        Meta::Path(_) => return args,
        Meta::List(list) => {
            parenthesized(list, errors);
            list::read(list.tokens.clone(), place, errors)
        }
        Meta::NameValue(nv) => {
            errors.push(name_value_form(attr, nv));
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
            "rate_limit" => args.rate_limit = option.parse(errors),
            _ => {}
        }
    }
    args
}

/// `#[step[...]]` or `#[step{...}]`: reported, and read all the same.
pub(super) fn parenthesized(list: &syn::MetaList, errors: &mut Accumulator) {
    let (open, close) = match &list.delimiter {
        syn::MacroDelimiter::Paren(_) => return,
        syn::MacroDelimiter::Bracket(_) => ('[', ']'),
        syn::MacroDelimiter::Brace(_) => ('{', '}'),
    };
    let name = list
        .path
        .segments
        .last()
        .map(|segment| segment.ident.to_string())
        .unwrap_or_default();
    let options = super::list::echo_options(&list.tokens).unwrap_or_else(|| "...".to_owned());
    errors.push(
        Error::custom(format!(
            "write `#[{name}({options})]` with parentheses, not `#[{name}{open}...{close}]`"
        ))
        .with_span(&list.delimiter.span().open()),
    );
}

fn wait_for(option: &OptionItem<'_>, errors: &mut Accumulator) -> Option<RawWaitFor> {
    let Some(list) = option.list() else {
        // `wait_for = "name"`
        return option.parse::<Text>(errors).map(|name| RawWaitFor {
            name,
            matches: None,
        });
    };
    let ((name, matches), reported) = nested(errors, |errors| {
        let metas = list::read(list.tokens.clone(), Place::WaitFor, errors);
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
        // The options written stay in the example: only the name is missing.
        let rest = if list.tokens.is_empty() {
            String::new()
        } else {
            format!(", {}", code(&list.tokens))
        };
        errors.push(
            Error::custom(format!(
                "`wait_for(...)` needs the signal's name, e.g. \
                 `wait_for(name = \"payment.settled\"{rest})`"
            ))
            .with_span(&list.path),
        );
    }
    name.map(|name| RawWaitFor { name, matches })
}

/// `#[step = value]`: options go in parentheses. A string is most likely the
/// step's name, or its `wait` when it reads as a duration.
fn name_value_form(attr: &Attribute, nv: &syn::MetaNameValue) -> Error {
    let name = attribute_path(attr);
    let example = match &nv.value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => {
            let option = if pgbus_core::parse_duration_ms(&text.value()).is_ok() {
                "wait"
            } else {
                "name"
            };
            format!("#[{name}({option} = {})]", code(text))
        }
        _ => format!("#[{name}(wait = \"5s\")]"),
    };
    Error::custom(format!(
        "write {name} options in parentheses, e.g. `{example}`"
    ))
    .with_span(&nv.eq_token)
}

/// `#[on_exception]` on a method: the policy goes inside the step's own
/// attribute, shown with the options it already has.
fn policy_on_method(policy: &Attribute, marker: Option<&Attribute>) -> Error {
    let message = match (marker, &policy.meta) {
        (Some(marker), Meta::List(list)) => {
            let name = attribute_path(marker);
            let options = match &marker.meta {
                Meta::List(existing) if !existing.tokens.is_empty() => {
                    format!("{}, ", code(&existing.tokens))
                }
                _ => String::new(),
            };
            format!(
                "write a step's policies inside its attribute: `#[{name}({options}on_exception({}))]`; \
                 a separate `#[on_exception]` belongs on the impl, below `#[workflow]`",
                code(&list.tokens)
            )
        }
        _ => "write a step's policies inside its attribute, e.g. `#[step(on_exception(...))]`; \
              a separate `#[on_exception]` belongs on the impl, below `#[workflow]`"
            .to_owned(),
    };
    Error::custom(message).with_span(policy.path())
}

/// The attribute's path as written, e.g. `step` or `pgbus::step`.
fn attribute_path(attr: &Attribute) -> String {
    code(attr.path())
}
