//! The static `WorkflowDefinition`.

use pgbus_core::{DeadlineAction, EntryKind, FailureAction, OnTimeout, Rate, Report, SlotHolder};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use crate::model::{ActionDef, EntryDef, FlowDef, PolicyDef, WorkflowDef};
use crate::validate::tokens;

/// The methods the definition refers to by index, in index order; the dispatch
/// matches on the same indices.
#[derive(Default)]
pub(super) struct Tables<'a> {
    /// `cancel_if` and `skip_if` guards, for `check_guard`.
    pub(super) guards: Vec<&'a Path>,
    /// `wait_for(matches = ...)` predicates, for `signal_matches`.
    pub(super) matchers: Vec<&'a Path>,
    /// `on_exception(handler = ...)` methods, for `handle_error`.
    pub(super) handlers: Vec<&'a Path>,
}

pub(super) fn static_definition(def: &WorkflowDef) -> (TokenStream, Tables<'_>) {
    let mut tables = Tables::default();
    let p = &super::private(&def.krate, proc_macro2::Span::call_site());

    // `type Input = #input` in the impl checks the input's bounds at the user's
    // span; nothing else is needed here.
    let input = &def.input;
    let name = &def.name;
    let type_name = tokens(&def.self_ty);
    let input_type = tokens(input);
    let queue = &def.queue;
    let priority = def.priority;
    let cancel_if: Vec<TokenStream> = def
        .cancel_if
        .iter()
        .map(|path| guard_ref(p, &mut tables.guards, path))
        .collect();
    let policies: Vec<TokenStream> = def
        .policies
        .iter()
        .map(|policy| policy_tokens(p, policy, &mut tables))
        .collect();
    let entries: Vec<TokenStream> = def
        .entries
        .iter()
        .map(|entry| entry_tokens(p, entry, &mut tables))
        .collect();
    let digest = &def.digest;
    let options_digest = &def.options_digest;
    let options_json = &def.options_json;
    let flow = flow_tokens(p, &def.flow);

    let tokens = quote! {
        static __PGBUS_DEFINITION: #p::WorkflowDefinition = #p::WorkflowDefinition {
            name: #name,
            type_name: #type_name,
            input_type: #input_type,
            queue: #queue,
            priority: #priority,
            cancel_if: &[#(#cancel_if),*],
            on_exception: &[#(#policies),*],
            entries: &[#(#entries),*],
            flow: #flow,
            digest: #digest,
            options_digest: #options_digest,
            options_json: #options_json,
        };
    };
    (tokens, tables)
}

fn entry_tokens<'a>(p: &TokenStream, entry: &'a EntryDef, tables: &mut Tables<'a>) -> TokenStream {
    let name = &entry.name;
    let method = option(entry.method.as_ref().map(|m| {
        let method = m.ident.to_string();
        quote!(#method)
    }));
    let kind = match entry.kind {
        EntryKind::Step => quote!(#p::EntryKind::Step),
        EntryKind::FanOut => quote!(#p::EntryKind::FanOut),
        EntryKind::Removed => quote!(#p::EntryKind::Removed),
    };
    let o = &entry.options;
    let wait_ms = o.wait_ms;
    let timeout_ms = option(o.timeout_ms.map(|ms| quote!(#ms)));
    let skip_if = option(
        o.skip_if
            .as_ref()
            .map(|path| guard_ref(p, &mut tables.guards, path)),
    );
    let queue = option(o.queue.as_ref().map(|q| quote!(#q)));
    let priority = option(o.priority.map(|n| quote!(#n)));
    let wait_for = option(o.wait_for.as_ref().map(|w| {
        let signal = &w.signal;
        let matches = option(w.matches.as_ref().map(|path| guard_ref(p, &mut tables.matchers, path)));
        let timeout_ms = option(w.timeout_ms.map(|ms| quote!(#ms)));
        let on_timeout = match w.on_timeout {
            OnTimeout::Pause => quote!(#p::OnTimeout::Pause),
            OnTimeout::Cancel => quote!(#p::OnTimeout::Cancel),
            OnTimeout::Skip => quote!(#p::OnTimeout::Skip),
            OnTimeout::Run => quote!(#p::OnTimeout::Run),
        };
        quote! {
            #p::WaitFor { signal: #signal, matches: #matches, timeout_ms: #timeout_ms, on_timeout: #on_timeout }
        }
    }));
    let on_batch_failure = option(o.on_batch_failure.map(|action| failure_action(p, action)));
    let policies: Vec<TokenStream> = o
        .policies
        .iter()
        .map(|policy| policy_tokens(p, policy, tables))
        .collect();
    let rate_limit = option(o.rate_limit.map(|rate| rate_tokens(p, rate)));
    quote! {
        #p::Entry {
            name: #name,
            method: #method,
            kind: #kind,
            options: #p::StepOptions {
                wait_ms: #wait_ms,
                timeout_ms: #timeout_ms,
                skip_if: #skip_if,
                queue: #queue,
                priority: #priority,
                wait_for: #wait_for,
                on_batch_failure: #on_batch_failure,
                on_exception: &[#(#policies),*],
                rate_limit: #rate_limit,
            },
        }
    }
}

/// `FlowControl::NONE` when no flow option is written, else the literal with
/// the defaults filled in.
fn flow_tokens(p: &TokenStream, flow: &FlowDef) -> TokenStream {
    if flow.is_empty() {
        return quote!(#p::FlowControl::NONE);
    }
    let concurrency = option(flow.concurrency.map(|n| quote!(#n)));
    let has_key = flow.key.is_some();
    let key_concurrency = option(flow.key_concurrency.map(|n| quote!(#n)));
    let slot = match flow.slot.unwrap_or_default() {
        SlotHolder::Step => quote!(#p::SlotHolder::Step),
        SlotHolder::Run => quote!(#p::SlotHolder::Run),
    };
    let rate_limit = option(flow.rate_limit.map(|rate| rate_tokens(p, rate)));
    let key_rate_limit = option(flow.key_rate_limit.map(|rate| rate_tokens(p, rate)));
    let deadline_ms = option(flow.deadline_ms.map(|ms| quote!(#ms)));
    let on_deadline = match flow.on_deadline.unwrap_or_default() {
        DeadlineAction::Cancel => quote!(#p::DeadlineAction::Cancel),
        DeadlineAction::Pause => quote!(#p::DeadlineAction::Pause),
    };
    quote! {
        #p::FlowControl {
            concurrency: #concurrency,
            has_key: #has_key,
            key_concurrency: #key_concurrency,
            slot: #slot,
            rate_limit: #rate_limit,
            key_rate_limit: #key_rate_limit,
            deadline_ms: #deadline_ms,
            on_deadline: #on_deadline,
        }
    }
}

fn rate_tokens(p: &TokenStream, rate: Rate) -> TokenStream {
    let Rate { count, period_ms } = rate;
    quote!(#p::Rate { count: #count, period_ms: #period_ms })
}

fn policy_tokens<'a>(
    p: &TokenStream,
    policy: &'a PolicyDef,
    tables: &mut Tables<'a>,
) -> TokenStream {
    let matching = policy.matching.iter().map(|ty| {
        let type_name = tokens(ty);
        // Spanned at the user's type: a type that is not an error is reported there.
        let p = crate::span::respan(p.clone(), ty.span());
        quote_spanned! {ty.span()=>
            #p::ErrorMatcher { type_name: #type_name, matches: #p::matches_type::<#ty> }
        }
    });
    let action = match &policy.action {
        ActionDef::Pause => quote!(#p::PolicyAction::Pause),
        ActionDef::Cancel => quote!(#p::PolicyAction::Cancel),
        ActionDef::Skip => quote!(#p::PolicyAction::Skip),
        ActionDef::Reattempt {
            wait_ms,
            max_reattempts,
            terminal_action,
        } => {
            let terminal_action = failure_action(p, *terminal_action);
            quote! {
                #p::PolicyAction::Reattempt {
                    wait_ms: #wait_ms,
                    max_reattempts: #max_reattempts,
                    terminal_action: #terminal_action,
                }
            }
        }
        ActionDef::Handler(path) => {
            let id = next_id(&tables.handlers);
            tables.handlers.push(path);
            let method = tokens(path);
            quote!(#p::PolicyAction::Handler(#p::HandlerRef { id: #id, method: #method }))
        }
    };
    let report = match policy.report {
        Report::Always => quote!(#p::Report::Always),
        Report::Never => quote!(#p::Report::Never),
        Report::TerminalOnly => quote!(#p::Report::TerminalOnly),
    };
    quote! {
        #p::ExceptionPolicy { matching: &[#(#matching),*], action: #action, report: #report }
    }
}

fn guard_ref<'a>(p: &TokenStream, table: &mut Vec<&'a Path>, path: &'a Path) -> TokenStream {
    let id = next_id(table);
    table.push(path);
    let method = tokens(path);
    quote!(#p::GuardRef { id: #id, method: #method })
}

/// The next index of a table. Tables hold one row per option written in one impl,
/// far below `u16::MAX`; saturating keeps the macro panic-free regardless.
fn next_id(table: &[&Path]) -> u16 {
    u16::try_from(table.len()).unwrap_or(u16::MAX)
}

fn failure_action(p: &TokenStream, action: FailureAction) -> TokenStream {
    match action {
        FailureAction::Pause => quote!(#p::FailureAction::Pause),
        FailureAction::Cancel => quote!(#p::FailureAction::Cancel),
        FailureAction::Skip => quote!(#p::FailureAction::Skip),
    }
}

fn option(value: Option<TokenStream>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}
