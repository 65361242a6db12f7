//! The `Workflow` implementation: dispatch from indices to the user's methods.
//! Calls are spanned at the user's tokens, so a wrong signature or return type is
//! reported on the method, guard or handler that has it.

use pgbus_core::EntryKind;
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use super::definition::Tables;
use crate::model::WorkflowDef;

pub(super) fn workflow_impl(def: &WorkflowDef, tables: &Tables<'_>) -> TokenStream {
    let p = &super::private(&def.krate, proc_macro2::Span::call_site());
    let self_ty = &def.self_ty;
    let input = &def.input;
    let output = &def.output;
    let usize_ty = quote!(::core::primitive::usize);
    let bool_ty = quote!(::core::primitive::bool);
    let result = quote!(::core::result::Result);

    let step_arms = step_arms(def, p);

    let guard_arms = tables.guards.iter().enumerate().map(|(id, path)| {
        let id = id_literal(id);
        let call = method_call(path, &quote_spanned!(path.span()=> self, __pgbus_cx));
        let p = crate::span::respan(p.clone(), path.span());
        quote_spanned! {path.span()=> #id => #p::guard_result(#call), }
    });
    let matcher_arms = tables.matchers.iter().enumerate().map(|(id, path)| {
        let id = id_literal(id);
        let call = method_call(
            path,
            &quote_spanned!(path.span()=> self, __pgbus_cx, __pgbus_signal),
        );
        let p = crate::span::respan(p.clone(), path.span());
        quote_spanned! {path.span()=> #id => #p::guard_result(#call), }
    });
    let handler_arms = tables.handlers.iter().enumerate().map(|(id, path)| {
        let id = id_literal(id);
        let call = method_call(
            path,
            &quote_spanned!(path.span()=> self, __pgbus_cx, __pgbus_error),
        );
        let p = crate::span::respan(p.clone(), path.span());
        quote_spanned! {path.span()=> #id => #p::handler_outcome(#call), }
    });

    let schedule = schedule_const(def, p);
    let concurrency_key = concurrency_key(def);

    quote! {
        // A step may be `#[deprecated]`; calling it from the dispatch is not a use.
        #[allow(deprecated)]
        impl #p::Workflow for #self_ty {
            type Input = #input;
            type Output = #output;

            const DEFINITION: &'static #p::WorkflowDefinition = &__PGBUS_DEFINITION;

            #schedule

            #concurrency_key

            fn run_step<'__pgbus_a>(
                &'__pgbus_a self,
                __pgbus_entry: #usize_ty,
                __pgbus_cx: &'__pgbus_a mut #p::StepCx<Self::Input>,
                __pgbus_fan: &'__pgbus_a mut #p::FanOut,
            ) -> #p::StepFuture<'__pgbus_a> {
                match __pgbus_entry {
                    #(#step_arms)*
                    _ => #p::no_such_step(<Self as #p::Workflow>::DEFINITION, __pgbus_entry),
                }
            }

            fn check_guard(
                &self,
                __pgbus_guard: #p::GuardRef,
                __pgbus_cx: &#p::StepCx<Self::Input>,
            ) -> #result<#bool_ty, #p::StepError> {
                match __pgbus_guard.id {
                    #(#guard_arms)*
                    _ => #result::Err(#p::not_defined(<Self as #p::Workflow>::DEFINITION, __pgbus_guard.method)),
                }
            }

            fn signal_matches(
                &self,
                __pgbus_guard: #p::GuardRef,
                __pgbus_cx: &#p::StepCx<Self::Input>,
                __pgbus_signal: &#p::Signal,
            ) -> #result<#bool_ty, #p::StepError> {
                match __pgbus_guard.id {
                    #(#matcher_arms)*
                    _ => #result::Err(#p::not_defined(<Self as #p::Workflow>::DEFINITION, __pgbus_guard.method)),
                }
            }

            fn handle_error(
                &self,
                __pgbus_handler: #p::HandlerRef,
                __pgbus_cx: &#p::StepCx<Self::Input>,
                __pgbus_error: &#p::StepError,
            ) -> #result<::core::option::Option<#p::Flow>, #p::StepError> {
                match __pgbus_handler.id {
                    #(#handler_arms)*
                    _ => #result::Err(#p::not_defined(<Self as #p::Workflow>::DEFINITION, __pgbus_handler.method)),
                }
            }
        }
    }
}

/// `const SCHEDULE` for a workflow that declares one: its runs' input is the
/// input type's `Default`, required at the expression's span.
fn schedule_const(def: &WorkflowDef, p: &TokenStream) -> TokenStream {
    let Some(schedule) = &def.schedule else {
        return TokenStream::new();
    };
    let input = &def.input;
    let (expression, timezone) = (&schedule.expression, &schedule.timezone);
    let catch_up = match schedule.catch_up {
        pgbus_core::schedule::CatchUp::Skip => quote!(#p::CatchUp::Skip),
        pgbus_core::schedule::CatchUp::One => quote!(#p::CatchUp::One),
        pgbus_core::schedule::CatchUp::All(limit) => quote!(#p::CatchUp::All(#limit)),
    };
    // Spanned at the expression: the schedule is why the input needs `Default`.
    let p_at = crate::span::respan(p.clone(), schedule.span);
    let input_at = crate::span::respan(quote::ToTokens::to_token_stream(input), schedule.span);
    let input_fn = quote_spanned! {schedule.span=> #p_at::schedule_input::<#input_at> };
    quote! {
        const SCHEDULE: ::core::option::Option<&'static #p::DeclaredSchedule> =
            ::core::option::Option::Some(&#p::DeclaredSchedule {
                expression: #expression,
                timezone: #timezone,
                catch_up: #catch_up,
                input: #input_fn,
            });
    }
}

/// `fn concurrency_key` for a workflow with `key = path`: the user's method
/// called with the input, its result turned into the key. The call is spanned
/// at the path, so a method that does not exist, takes another type or
/// returns something that is not `Into<String>` is reported there.
fn concurrency_key(def: &WorkflowDef) -> TokenStream {
    let Some(path) = &def.flow.key else {
        return TokenStream::new();
    };
    let call = method_call(path, &quote_spanned!(path.span()=> __pgbus_input));
    let string = quote_spanned!(path.span()=> ::std::string::String);
    let into = quote_spanned! {path.span()=>
        ::core::convert::Into::<#string>::into(#call)
    };
    quote! {
        fn concurrency_key(
            __pgbus_input: &Self::Input,
        ) -> ::core::option::Option<::std::string::String> {
            ::core::option::Option::Some(#into)
        }
    }
}

/// One match arm per live step: entry index to the user's method, its future boxed.
fn step_arms(def: &WorkflowDef, p: &TokenStream) -> Vec<TokenStream> {
    def.entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| {
            let method = entry.method.as_ref()?;
            let ident = &method.ident;
            // The helper paths carry the method's span too, so a bound they add is
            // reported on the method, not on `#[workflow]`.
            let p = crate::span::respan(p.clone(), ident.span());
            let cx_ty = &elide_lifetime(&method.cx_ty);
            let bind_cx = quote_spanned! {cx_ty.span()=> let __pgbus_cx: #cx_ty = __pgbus_cx; };
            let call = match (&entry.kind, &method.fan_ty) {
                (EntryKind::FanOut, Some(fan_ty)) => {
                    let bind_fan =
                        quote_spanned! {fan_ty.span()=> let __pgbus_fan: #fan_ty = __pgbus_fan; };
                    quote_spanned! {ident.span()=>
                        #bind_cx
                        #bind_fan
                        #p::into_step_result(Self::#ident(self, __pgbus_cx, __pgbus_fan).await)
                    }
                }
                _ => quote_spanned! {ident.span()=>
                    #bind_cx
                    #p::into_step_result(Self::#ident(self, __pgbus_cx).await)
                },
            };
            Some(quote_spanned! {ident.span()=>
                #index => #p::step_future(async move { #call }),
            })
        })
        .collect()
}

/// `&'a mut StepCx<I>` as `&mut StepCx<I>`: the method's own lifetime parameters
/// mean nothing in the dispatch, where the binding's lifetime is inferred.
fn elide_lifetime(ty: &syn::Type) -> syn::Type {
    let mut ty = ty.clone();
    if let syn::Type::Reference(reference) = &mut ty {
        reference.lifetime = None;
    }
    ty
}

/// A bare identifier names a method of the workflow (`Self::ident`); any longer
/// path is called as written, with `args` (the workflow value first, except
/// for the `key` method).
fn method_call(path: &Path, args: &TokenStream) -> TokenStream {
    if let Some(ident) = path.get_ident() {
        quote_spanned! {path.span()=> Self::#ident(#args) }
    } else {
        quote_spanned! {path.span()=> #path(#args) }
    }
}

fn id_literal(id: usize) -> TokenStream {
    let id = u16::try_from(id).unwrap_or(u16::MAX);
    quote!(#id)
}
