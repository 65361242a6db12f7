//! Stage three: tokens from the validated model. Reads only the model, never
//! syn's item tree (the user's cleaned impl is passed through untouched).

mod definition;
mod dispatch;

use darling::Error;
use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;

use crate::parse::Ours;
use crate::{parse, report, validate};

/// `#[workflow]`: the user's impl (pgbus attributes stripped) plus either the
/// `Workflow` implementation, or every error found and a stand-in implementation
/// so that code using the workflow elsewhere does not fail as well.
pub(crate) fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut imp = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Impl(imp)) => imp,
        Ok(other) => {
            // A type's own impl is the fix; other items get an example.
            let ty = match &other {
                syn::Item::Struct(s) => s.ident.to_string(),
                syn::Item::Enum(e) => e.ident.to_string(),
                syn::Item::Union(u) => u.ident.to_string(),
                _ => "Fulfil".to_owned(),
            };
            let error = Error::custom(format!(
                "`#[workflow]` goes on an inherent impl block, e.g. `#[workflow] impl {ty} {{ ... }}`"
            ))
            .with_span(&item_name_span(&other))
            .write_errors();
            return quote! { #error #other };
        }
        // Not valid Rust: the compiler reports the syntax error itself. Strip our
        // attributes so it reports nothing else.
        Err(_) => return unparsable(&args, item),
    };

    let stand_in_ok = imp.trait_.is_none()
        && matches!(&*imp.self_ty, syn::Type::Path(path) if path.qself.is_none())
        && imp.generics.params.is_empty()
        && imp.generics.where_clause.is_none();
    let mut errors = Error::accumulator();
    let raw = parse::workflow(args, &mut imp, &mut errors);
    let stand_in = stand_in_ok.then(|| {
        stand_in(
            raw.krate.as_ref(),
            &raw.self_ty,
            raw.input.as_ref(),
            raw.output.as_ref(),
        )
    });
    let model = validate::workflow(raw, &mut errors);
    let found = errors.into_inner();
    match (found.is_empty(), model) {
        (true, Some(model)) => {
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
        (false, _) => {
            // In source order, not in the order the stages found them.
            let errors = Error::multiple(report::in_source_order(found)).write_errors();
            quote! { #imp #errors #stand_in }
        }
        (true, None) => quote! { #imp #stand_in },
    }
}

/// A `Workflow` implementation with an empty definition, emitted only beside
/// compile errors: it never runs, it only keeps `W::DEFINITION`,
/// `client.start::<W>(..)` and the like from failing too.
fn stand_in(
    krate: Option<&syn::Path>,
    self_ty: &syn::Type,
    input: Option<&syn::Type>,
    output: Option<&syn::Type>,
) -> TokenStream {
    let krate = krate.map_or_else(|| quote!(::pgbus_runtime), ToTokens::to_token_stream);
    let p = private(&krate, Span::call_site());
    let input = input.map_or_else(|| quote!(()), ToTokens::to_token_stream);
    let output = output.map_or_else(|| quote!(()), ToTokens::to_token_stream);
    quote! {
        #[allow(clippy::all, clippy::pedantic, unused)]
        const _: () = {
            impl #p::Workflow for #self_ty {
                type Input = #input;
                type Output = #output;
                const DEFINITION: &'static #p::WorkflowDefinition = &#p::STAND_IN_DEFINITION;
                fn run_step<'__pgbus_a>(
                    &'__pgbus_a self,
                    __pgbus_entry: ::core::primitive::usize,
                    _: &'__pgbus_a mut #p::StepCx<Self::Input>,
                    _: &'__pgbus_a mut #p::FanOut,
                ) -> #p::StepFuture<'__pgbus_a> {
                    #p::no_such_step(&#p::STAND_IN_DEFINITION, __pgbus_entry)
                }
                fn check_guard(
                    &self,
                    __pgbus_guard: #p::GuardRef,
                    _: &#p::StepCx<Self::Input>,
                ) -> ::core::result::Result<::core::primitive::bool, #p::StepError> {
                    ::core::result::Result::Err(#p::not_defined(&#p::STAND_IN_DEFINITION, __pgbus_guard.method))
                }
                fn signal_matches(
                    &self,
                    __pgbus_guard: #p::GuardRef,
                    _: &#p::StepCx<Self::Input>,
                    _: &#p::Signal,
                ) -> ::core::result::Result<::core::primitive::bool, #p::StepError> {
                    ::core::result::Result::Err(#p::not_defined(&#p::STAND_IN_DEFINITION, __pgbus_guard.method))
                }
                fn handle_error(
                    &self,
                    __pgbus_handler: #p::HandlerRef,
                    _: &#p::StepCx<Self::Input>,
                    _: &#p::StepError,
                ) -> ::core::result::Result<::core::option::Option<#p::Flow>, #p::StepError> {
                    ::core::result::Result::Err(#p::not_defined(&#p::STAND_IN_DEFINITION, __pgbus_handler.method))
                }
            }
        };
    }
}

/// An impl syn cannot parse (a syntax error in some method): hand the tokens back
/// without our attributes and gravestones, plus a stand-in implementation when the
/// header still reads as `impl Type`.
fn unparsable(args: &TokenStream, item: TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = item.into_iter().collect();
    let header: TokenStream = trees
        .iter()
        .skip_while(|tree| !matches!(tree, TokenTree::Ident(ident) if ident == "impl"))
        .skip(1)
        .take_while(
            |tree| !matches!(tree, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace),
        )
        .cloned()
        .collect();
    let LooseArgs {
        krate,
        input,
        output,
    } = loose_args(args);
    let stripped = strip_ours(trees, true, &Ours::new(krate.as_ref()));
    let Ok(self_ty) = syn::parse2::<syn::Type>(header) else {
        return stripped;
    };
    if !matches!(&self_ty, syn::Type::Path(_)) {
        return stripped;
    }
    let stand_in = stand_in(krate.as_ref(), &self_ty, input.as_ref(), output.as_ref());
    quote! { #stripped #stand_in }
}

/// What the stand-in implementation needs of `#[workflow(...)]`.
#[derive(Default)]
struct LooseArgs {
    krate: Option<syn::Path>,
    input: Option<syn::Type>,
    output: Option<syn::Type>,
}

/// `crate`, `input` and `output` from `#[workflow(...)]`, when they parse;
/// anything wrong there is reported once the impl itself parses.
fn loose_args(args: &TokenStream) -> LooseArgs {
    let (krate, input, output) = parse::loose_workflow_args(args.clone());
    LooseArgs {
        krate,
        input,
        output,
    }
}

/// Drops `#[step]`, `#[fan_out]`, `#[on_exception]` and `removed_step!(..);` at the
/// top level and, when `into_body`, inside the impl's braces.
fn strip_ours(trees: Vec<TokenTree>, into_body: bool, ours: &Ours) -> TokenStream {
    let mut out = Vec::with_capacity(trees.len());
    let mut iter = trees.into_iter().peekable();
    while let Some(tree) = iter.next() {
        match &tree {
            TokenTree::Punct(punct) if punct.as_char() == '#' => {
                if let Some(TokenTree::Group(group)) = iter.peek()
                    && group.delimiter() == Delimiter::Bracket
                    && is_our_attribute(&group.stream(), ours)
                {
                    iter.next();
                    continue;
                }
            }
            TokenTree::Ident(ident) if ident == "removed_step" => {
                if matches!(iter.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '!') {
                    iter.next();
                    iter.next();
                    if matches!(iter.peek(), Some(TokenTree::Punct(p)) if p.as_char() == ';') {
                        iter.next();
                    }
                    continue;
                }
            }
            TokenTree::Group(group) if into_body && group.delimiter() == Delimiter::Brace => {
                let mut body = Group::new(
                    Delimiter::Brace,
                    strip_ours(group.stream().into_iter().collect(), false, ours),
                );
                body.set_span(group.span());
                out.push(TokenTree::Group(body));
                continue;
            }
            _ => {}
        }
        out.push(tree);
    }
    out.into_iter().collect()
}

fn is_our_attribute(tokens: &TokenStream, ours: &Ours) -> bool {
    // The attribute's path: identifiers joined by `::`, up to its arguments.
    let mut words = Vec::new();
    for tree in tokens.clone() {
        match tree {
            TokenTree::Ident(ident) => words.push(ident.to_string()),
            TokenTree::Punct(punct) if punct.as_char() == ':' => {}
            _ => break,
        }
    }
    ["step", "fan_out", "on_exception"]
        .iter()
        .any(|name| ours.is_words(&words, name))
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

/// `krate::__private`, every token spanned at `span`.
fn private(krate: &TokenStream, span: Span) -> TokenStream {
    crate::span::respan(quote!(#krate::__private), span)
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
