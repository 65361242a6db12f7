//! A step method's signature: `async fn name(&self, cx: &mut StepCx<I>)`, plus
//! `fan: &mut FanOut` for a fan_out.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::EntryKind;
use syn::spanned::Spanned;
use syn::{FnArg, ImplItemFn, ReceiverKind, Type};

use super::step::attribute_name;
use super::{StepSignature, generics_span};
use crate::render::code;

/// Checks `async fn name(&self, cx: &mut StepCx<I>)` (plus `fan: &mut FanOut` for a
/// fan_out) and returns the argument types.
pub(super) fn check_signature(
    method: &ImplItemFn,
    kind: EntryKind,
    input: Option<&Type>,
    errors: &mut Accumulator,
) -> Option<StepSignature> {
    let sig = &method.sig;
    let attr = attribute_name(kind);
    let parts = Shape::of(sig, kind, input);
    let shape = parts.whole.as_str();
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
            format!("the step context as `{}`", parts.cx)
        } else {
            format!("the batch as `{}`", parts.fan)
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
                "a `#[{attr}]` method cannot be generic: the engine calls it with the workflow's \
                 input type; write {shape}"
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

/// The signature a step method should have, in the user's own words: its
/// name, its argument names, and the workflow's input type, e.g.
/// `async fn charge(&self, cx: &mut StepCx<Order>)`.
struct Shape {
    /// The whole signature, in backticks.
    whole: String,
    /// `cx: &mut StepCx<Order>`.
    cx: String,
    /// `fan: &mut FanOut`.
    fan: String,
}

impl Shape {
    fn of(sig: &syn::Signature, kind: EntryKind, input: Option<&Type>) -> Self {
        let typed: Vec<&syn::PatType> = sig
            .inputs
            .iter()
            .filter_map(|arg| match arg {
                FnArg::Typed(arg) => Some(arg),
                FnArg::Receiver(_) => None,
            })
            .collect();
        let name = |index: usize, default: &str| {
            typed
                .get(index)
                .and_then(|arg| match &*arg.pat {
                    syn::Pat::Ident(pat) => Some(pat.ident.to_string()),
                    _ => None,
                })
                .unwrap_or_else(|| default.to_owned())
        };
        let context = context_type(typed.first().map(|arg| &*arg.ty), sig, input);
        let cx = format!("{}: &mut {context}", name(0, "cx"));
        let fan = format!("{}: &mut FanOut", name(1, "fan"));
        let args = if kind == EntryKind::FanOut {
            format!("{cx}, {fan}")
        } else {
            cx.clone()
        };
        Self {
            whole: format!("`async fn {}(&self, {args})`", sig.ident),
            cx,
            fan,
        }
    }
}

/// The context type to show: the workflow's input when it names one, else the
/// user's own `StepCx<..>` when it names none of the method's own generics,
/// else `StepCx<()>`, the context of a workflow without input.
fn context_type(written: Option<&Type>, sig: &syn::Signature, input: Option<&Type>) -> String {
    if let Some(input) = input {
        return format!("StepCx<{}>", code(input));
    }
    let mut ty = written;
    while let Some(Type::Reference(reference)) = ty {
        ty = Some(&reference.elem);
    }
    let own = ty.filter(|ty| {
        let is_context = matches!(ty, Type::Path(path)
            if path.path.segments.last().is_some_and(|last| last.ident == "StepCx"));
        let text = code(*ty);
        let generic = sig.generics.params.iter().any(|param| match param {
            syn::GenericParam::Type(param) => text.contains(&param.ident.to_string()),
            _ => false,
        });
        is_context && !generic
    });
    own.map_or_else(|| "StepCx<()>".to_owned(), code)
}
