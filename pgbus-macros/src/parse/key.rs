//! The method `#[workflow(key = ...)]` names: `fn method(input: &Input) ->
//! impl Into<String>`, with no receiver, since the client computes the key at
//! start, where no workflow value exists. Checked here when the path names a
//! method of this impl; the return type, and a path to elsewhere, are left to
//! the compiler, at the path (see `expand::dispatch`).

use darling::Error;
use darling::error::Accumulator;
use syn::spanned::Spanned;
use syn::{FnArg, ImplItem, ItemImpl};

use super::RawWorkflow;

/// Reports a `key` method of this impl whose shape cannot take the input.
pub(super) fn check_key_method(
    item: &ItemImpl,
    path: &syn::Path,
    raw: &RawWorkflow,
    errors: &mut Accumulator,
) {
    let Some(name) = own_method(path, raw.type_ident.as_ref()) else {
        return;
    };
    let Some(method) = item.items.iter().find_map(|impl_item| match impl_item {
        ImplItem::Fn(method) if method.sig.ident == *name => Some(method),
        _ => None,
    }) else {
        return;
    };
    let sig = &method.sig;
    let input = raw
        .input
        .as_ref()
        .map_or_else(|| "()".to_owned(), crate::validate::tokens);
    // The user's own name for the input, when the first argument has one.
    let argument = sig
        .inputs
        .iter()
        .find_map(|arg| match arg {
            FnArg::Typed(typed) => match &*typed.pat {
                syn::Pat::Ident(pat) => Some(pat.ident.to_string()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .unwrap_or_else(|| "input".to_owned());
    let shape = format!(
        "a `key` method takes the input by reference and returns the key: \
         `fn {}({argument}: &{input}) -> String`",
        syn::ext::IdentExt::unraw(&sig.ident)
    );
    if let Some(receiver) = sig.receiver() {
        errors.push(
            Error::custom(format!(
                "{shape}, with no `self`: the client computes the key when it starts a run, \
                 where no workflow value exists"
            ))
            .with_span(&receiver.self_token),
        );
        return;
    }
    if let Some(asyncness) = &sig.asyncness {
        errors.push(
            Error::custom(format!(
                "{shape}; not `async`: the key is computed when a run starts"
            ))
            .with_span(asyncness),
        );
        return;
    }
    let count = sig
        .inputs
        .iter()
        .filter(|arg| matches!(arg, FnArg::Typed(_)))
        .count();
    if count != 1 {
        let span = sig
            .inputs
            .iter()
            .nth(1)
            .map_or_else(|| sig.ident.span(), Spanned::span);
        let found = if count == 0 {
            "this one takes none".to_owned()
        } else {
            format!("this one takes {count} arguments")
        };
        errors.push(Error::custom(format!("{shape}; {found}")).with_span(&span));
    }
}

/// The method `path` names in this impl: `m`, `Self::m` or `Type::m`.
fn own_method<'a>(path: &'a syn::Path, type_ident: Option<&syn::Ident>) -> Option<&'a syn::Ident> {
    if let Some(ident) = path.get_ident() {
        return Some(ident);
    }
    match path.segments.iter().collect::<Vec<_>>().as_slice() {
        [owner, method]
            if path.leading_colon.is_none()
                && owner.arguments.is_none()
                && (owner.ident == "Self" || Some(&owner.ident) == type_ident) =>
        {
            Some(&method.ident)
        }
        _ => None,
    }
}
