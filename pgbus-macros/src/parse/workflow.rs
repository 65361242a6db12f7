//! `#[workflow(...)]` and the impl it sits on: the workflow's own options, the
//! attributes on the impl, and a walk over the impl's items.

use darling::Error;
use darling::error::Accumulator;
use proc_macro2::TokenStream;
use syn::{ImplItem, ItemImpl, Type};

use super::gravestone::gravestone;
use super::on_exception::{policy, policy_attribute};
use super::options::{self, Place};
use super::ours::{Ours, item_attrs_mut, strip_stray};
use super::placement::Written;
use super::step::step_method;
use super::values::{InputType, OutputType, PathArg};
use super::{RawFlow, RawWorkflow, flow, generics_span, key, list};
use crate::render::code;

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
        output: None,
        queue: None,
        priority: None,
        cancel_if: Vec::new(),
        policies: Vec::new(),
        entries: Vec::new(),
        self_ty: (*item.self_ty).clone(),
        type_ident,
        krate: None,
        input_written: false,
        schedule: None,
        timezone: None,
        catch_up: None,
        flow: RawFlow::default(),
    };

    workflow_options(args, &mut raw, errors);

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
                if let Some(entry) = step_method(&mut method, &ours, raw.input.as_ref(), errors) {
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
    if let Some(path) = &raw.flow.key {
        key::check_key_method(item, &path.0, &raw, errors);
    }
    allow_contract_lints(item, &raw);
    raw
}

/// The options of `#[workflow(...)]` itself, into `raw`.
fn workflow_options(args: TokenStream, raw: &mut RawWorkflow, errors: &mut Accumulator) {
    let metas = list::read(args, Place::Workflow, errors);
    for option in options::read(&metas, Place::Workflow, errors) {
        match option.name.as_str() {
            "name" => raw.name = option.parse(errors),
            "input" => {
                raw.input_written = true;
                raw.input = option.parse::<InputType>(errors).map(|t| t.0);
            }
            "output" => raw.output = option.parse::<OutputType>(errors).map(|t| t.0),
            "queue" => raw.queue = option.parse(errors),
            "priority" => raw.priority = option.parse(errors),
            "cancel_if" => raw
                .cancel_if
                .extend(option.parse::<PathArg>(errors).map(|p| p.0)),
            "on_exception" if option.list().is_none() => errors.push(
                Error::custom(format!(
                    "the `on_exception = \"...\"` shorthand is for steps; on `#[workflow]` write \
                     `on_exception({})`",
                    Written::of(option.item).under("action")
                ))
                .with_span(&option.name_span()),
            ),
            "on_exception" => raw.policies.extend(policy(&option, errors)),
            "crate" => raw.krate = option.parse::<PathArg>(errors).map(|p| p.0),
            "schedule" => raw.schedule = option.parse(errors),
            "timezone" => raw.timezone = option.parse(errors),
            "catch_up" => raw.catch_up = option.parse(errors),
            _ => {
                flow::workflow_option(&mut raw.flow, &option, errors);
            }
        }
    }
}

/// Step methods must be `async fn(&self, ...)` and guards and handlers take
/// `&self` and may return `Result`, whether or not a body awaits, reads `self` or
/// fails: silence the pedantic clippy lints that would flag the contract itself.
fn allow_contract_lints(item: &mut ItemImpl, raw: &RawWorkflow) {
    let mut referenced: Vec<&syn::Path> = raw.cancel_if.iter().collect();
    referenced.extend(raw.flow.key.as_ref().map(|p| &p.0));
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
            Error::custom(format!(
                "`#[workflow]` goes on an inherent impl, `impl {}`, not on a trait impl; \
                 the macro implements the `Workflow` trait itself",
                code(&*item.self_ty)
            ))
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
