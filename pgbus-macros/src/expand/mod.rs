//! Stage three: tokens from the validated model. Reads only the model, never
//! syn's item tree (the user's cleaned impl is passed through untouched).

mod definition;
mod dispatch;

use darling::Error;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;

use crate::{parse, validate};

/// `#[workflow]`: the user's impl (pgbus attributes stripped) plus either the
/// `Workflow` implementation or every error found.
pub(crate) fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut imp = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Impl(imp)) => imp,
        Ok(other) => {
            let error = Error::custom(
                "`#[workflow]` goes on an inherent impl block, e.g. `#[workflow] impl Fulfil { ... }`",
            )
            .with_span(&item_name_span(&other))
            .write_errors();
            return quote! { #error #other };
        }
        // Not valid Rust: let the compiler report it on the original tokens.
        Err(_) => return item,
    };

    let mut errors = Error::accumulator();
    let raw = parse::workflow(args, &mut imp, &mut errors);
    let model = validate::workflow(raw, &mut errors);
    match (errors.finish(), model) {
        (Ok(()), Some(model)) => {
            let (definition, tables) = definition::static_definition(&model);
            let dispatch = dispatch::workflow_impl(&model, &tables);
            quote! {
                #imp
                #[allow(clippy::all, clippy::pedantic)]
                const _: () = {
                    #definition
                    #dispatch
                };
            }
        }
        (Err(errors), _) => {
            let errors = errors.write_errors();
            quote! { #imp #errors }
        }
        (Ok(()), None) => imp.into_token_stream(),
    }
}

/// `#[step]`, `#[fan_out]` or `#[on_exception]` that no `#[workflow]` consumed.
pub(crate) fn stray_attribute(name: &str, _args: TokenStream, item: &TokenStream) -> TokenStream {
    let message = match name {
        "on_exception" => {
            "`#[on_exception]` only works on a `#[workflow]` impl, written below `#[workflow]`; \
             for a step, write `#[step(on_exception(...))]`"
                .to_owned()
        }
        _ => format!(
            "`#[{name}]` only works on a method inside a `#[workflow]` impl; add `#[workflow]` to the impl block"
        ),
    };
    let error = Error::custom(message)
        .with_span(&Span::call_site())
        .write_errors();
    quote! { #error #item }
}

/// `removed_step!` that no `#[workflow]` consumed.
pub(crate) fn stray_removed_step(_input: TokenStream) -> TokenStream {
    Error::custom("`removed_step!` only works inside a `#[workflow]` impl, among its steps")
        .with_span(&Span::call_site())
        .write_errors()
}

fn item_name_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Struct(s) => s.ident.span(),
        syn::Item::Enum(e) => e.ident.span(),
        syn::Item::Fn(f) => f.sig.ident.span(),
        syn::Item::Trait(t) => t.ident.span(),
        syn::Item::Mod(m) => m.ident.span(),
        syn::Item::Union(u) => u.ident.span(),
        syn::Item::Type(t) => t.ident.span(),
        other => other.span(),
    }
}

#[cfg(test)]
mod tests;
