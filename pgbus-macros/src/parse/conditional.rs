//! `#[cfg]` and `#[cfg_attr]` on steps. Attribute macros run before `cfg`
//! applies, and a definition that differs between builds would give runs
//! started by one build a digest the other does not know: a step that exists
//! in some builds only is refused with the advice to decide at run time
//! (`skip_if`); options that differ per build are refused with the advice to
//! override them per deployment at registration (`pgbus_runtime::Overrides`).

use darling::Error;
use syn::punctuated::Punctuated;
use syn::{Attribute, Meta, Token};

use super::ours::Ours;
use crate::render::code;

/// `#[cfg]` on a step or a gravestone.
pub(super) fn cfg(attr: &Attribute) -> Error {
    Error::custom(
        "a step cannot be conditional: `#[cfg]` would give builds different step lists and \
         digests; keep the step and decide at run time with `skip_if`",
    )
    .with_span(attr.path())
}

/// `#[cfg]` on a `removed_step!`: there is no step to decide on at run time,
/// so the advice of [`cfg`] does not fit; the gravestone stays in every build.
pub(super) fn cfg_gravestone(attr: &Attribute) -> Error {
    Error::custom(
        "a gravestone cannot be conditional: `#[cfg]` would give builds different step lists \
         and digests; a `removed_step!` belongs in every build, so remove the `#[cfg]`",
    )
    .with_span(attr.path())
}

/// Whether a `#[cfg_attr(...)]` would add one of our attributes.
pub(super) fn mentions_ours(attr: &Attribute) -> bool {
    let Meta::List(list) = &attr.meta else {
        return false;
    };
    list.tokens.clone().into_iter().any(|tree| {
        matches!(&tree, proc_macro2::TokenTree::Ident(ident)
            if ["step", "fan_out", "on_exception", "workflow"].iter().any(|name| ident == name))
    })
}

/// A `#[cfg_attr(...)]` on `method` that adds one of our attributes;
/// `marker` is the method's own `#[step]` or `#[fan_out]`, if it has one.
pub(super) fn cfg_attr(
    attr: &Attribute,
    method: &syn::Ident,
    marker: Option<&Attribute>,
    ours: &Ours,
) -> Error {
    let added = added(attr);
    let find = |names: &[&str]| {
        added
            .iter()
            .find(|meta| names.iter().any(|name| ours.is_path(meta.path(), name)))
    };
    let message = if let Some(step) = find(&["step", "fan_out"]) {
        if marker.is_some() {
            "a `#[cfg_attr]` cannot change a step's options per build: builds would disagree on \
             the options digest of the same definition; keep one set of options for every \
             build, and override durations, queue, priority and limits per deployment (or per \
             test) at registration (see `pgbus_runtime::Overrides`)"
                .to_owned()
        } else {
            let overrides = if matches!(step, Meta::List(_)) {
                ", and override its durations per deployment at registration (see \
                 `pgbus_runtime::Overrides`)"
            } else {
                ""
            };
            format!(
                "a step cannot be conditional: this `#[cfg_attr]` makes `{method}` a step in some \
                 builds only, and builds would disagree on the step list and digest; write \
                 `#[{}]` for every build, decide at run time with `skip_if` whether it \
                 runs{overrides}",
                code(step)
            )
        }
    } else if find(&["on_exception"]).is_some() {
        "a `#[cfg_attr]` cannot add a policy in some builds only: builds would disagree on the \
         options digest of the same definition; write the policy for every build, inside the \
         step's attribute, e.g. `#[step(on_exception(...))]`"
            .to_owned()
    } else if find(&["workflow"]).is_some() {
        "`#[workflow]` goes on the impl block, not on a method".to_owned()
    } else {
        // The attributes did not read as a list: say what holds for any of ours.
        "a step cannot be conditional: `#[cfg_attr]` would give builds different step lists, \
         options and digests; write the step's attributes for every build"
            .to_owned()
    };
    Error::custom(message).with_span(attr.path())
}

/// The attributes a `#[cfg_attr(predicate, a, b)]` adds: `a` and `b`.
fn added(attr: &Attribute) -> Vec<Meta> {
    attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
        .map(|metas| metas.into_iter().skip(1).collect())
        .unwrap_or_default()
}
