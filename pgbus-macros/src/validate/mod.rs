//! Stage two: every rule of the DSL, applied to the raw options. Per-option and
//! per-step rules first, then the rules across steps; each error is spanned at
//! the smallest token that breaks the rule, and all are reported together.
//!
//! The rules of names and values are in `names`; the flow control rules in
//! `flow`; the options digest's JSON in `digest`.

mod digest;
mod flow;
mod names;
mod schedule;

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::defaults::{
    DEFAULT_MAX_REATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE, DEFAULT_REATTEMPT_WAIT_MS,
};
use pgbus_core::{EntryKind, ExceptionAction, FailureAction, OnTimeout, Report, rules};
use quote::ToTokens;

use crate::model::{ActionDef, EntryDef, MethodDef, PolicyDef, StepDef, WaitForDef, WorkflowDef};
use crate::parse::values::Int;
use crate::parse::{RawEntry, RawPolicy, RawStepArgs, RawWorkflow};
pub(crate) use digest::tokens;
use digest::{method_name, options_json};
use names::{check_names, non_empty, priority, queue, signal_name};

/// Validates and normalizes. Returns `None` only when there is nothing to build a
/// model from; otherwise returns a model even when errors were pushed (the caller
/// checks the accumulator).
pub(crate) fn workflow(raw: RawWorkflow, errors: &mut Accumulator) -> Option<WorkflowDef> {
    let name = match &raw.name {
        Some(text) => non_empty(text, "workflow `name`", "\"orders.fulfil\"", errors),
        None => raw
            .type_ident
            .as_ref()
            .map(|ident| syn::ext::IdentExt::unraw(ident).to_string()),
    };
    let queue = raw
        .queue
        .as_ref()
        .map_or_else(|| Some(DEFAULT_QUEUE.to_owned()), |q| queue(q, errors));
    let priority = raw
        .priority
        .map_or(Some(DEFAULT_PRIORITY), |p| priority(p, errors));
    let input = raw.input.clone().unwrap_or_else(|| syn::parse_quote!(()));
    let output_written = raw.output.is_some();
    let output = raw.output.clone().unwrap_or_else(|| syn::parse_quote!(()));
    let policies = policies(&raw.policies, errors);
    check_reachable(&raw.policies, Level::Workflow, errors);
    check_cancel_if(&raw.cancel_if, errors);
    if !raw.input_written {
        check_missing_input(&raw.entries, errors);
    }

    let mut entries = Vec::new();
    for entry in &raw.entries {
        entries.extend(entry_def(entry, errors));
    }
    check_names(&raw.entries, errors);
    if !raw.entries.iter().any(|e| e.kind != EntryKind::Removed) {
        errors.push(
            Error::custom(format!(
                "this workflow has no step; mark at least one `async fn(&self, cx: &mut StepCx<{}>)` \
                 method `#[step]`",
                crate::render::code(&input)
            ))
            .with_span(&raw.self_ty),
        );
    }

    let digest = pgbus_core::definition_digest(entries.iter().map(|e| (e.name.as_str(), e.kind)));
    let krate = raw
        .krate
        .as_ref()
        .map_or_else(|| quote::quote!(::pgbus_runtime), ToTokens::to_token_stream);
    let type_ident = raw.type_ident.clone();
    let schedule = schedule::schedule(&raw, errors);
    let flow = flow::flow(&raw.flow, errors);
    let mut def = WorkflowDef {
        krate,
        name: name?,
        self_ty: raw.self_ty,
        input,
        output,
        output_written,
        queue: queue?,
        priority: priority?,
        cancel_if: raw.cancel_if,
        policies,
        entries,
        digest,
        options_json: String::new(),
        options_digest: String::new(),
        schedule,
        flow,
    };
    def.options_json = options_json(&def, type_ident.as_ref()).to_string();
    def.options_digest = pgbus_core::sha256_hex(def.options_json.as_bytes());
    Some(def)
}

fn entry_def(entry: &RawEntry, errors: &mut Accumulator) -> Option<EntryDef> {
    if entry.kind == EntryKind::Removed {
        let name = entry.removed_name.as_ref()?;
        let name = non_empty(name, "removed step name", "legacy_check", errors)?;
        return Some(EntryDef {
            name,
            kind: EntryKind::Removed,
            method: None,
            options: StepDef::default(),
        });
    }
    let method = entry.method.as_ref()?;
    let own = syn::ext::IdentExt::unraw(method).to_string();
    let name = match &entry.args.name {
        // The method's own name is the example: leaving `name` out gives it.
        Some(text) => non_empty(text, "step `name`", &format!("{own:?}"), errors),
        None => Some(own),
    };
    let options = step_options(&entry.args, entry.kind, errors);
    let signature = entry.signature.as_ref();
    Some(EntryDef {
        name: name?,
        kind: entry.kind,
        method: signature.map(|sig| MethodDef {
            ident: method.clone(),
            cx_ty: sig.cx_ty.clone(),
            fan_ty: sig.fan_ty.clone(),
        }),
        options,
    })
}

fn step_options(args: &RawStepArgs, kind: EntryKind, errors: &mut Accumulator) -> StepDef {
    // The value rules are pgbus-core's: a deployment's overrides are checked
    // by the same functions at registration.
    if let Some(timeout) = args.timeout
        && let Err(message) = rules::check_timeout_ms(timeout.ms)
    {
        errors.push(Error::custom(message).with_span(&timeout.span));
    }

    let wait_timeout_ms = args.wait_timeout.map(|wait_timeout| {
        if let Err(message) = rules::check_wait_timeout_ms(wait_timeout.ms) {
            errors.push(Error::custom(message).with_span(&wait_timeout.span));
        }
        // The rule is shared with overrides; the fix is the source's own.
        if let Err(rule) = rules::check_wait_timeout_place(args.wrote("wait_for")) {
            errors.push(
                Error::custom(format!(
                    "{rule}; add the signal, e.g. `wait_for = \"payment.settled\"`, or remove \
                     `wait_timeout`"
                ))
                .with_span(&wait_timeout.span),
            );
        }
        wait_timeout.ms
    });
    if let Some(on_timeout) = args.on_timeout {
        if !args.wrote("wait_for") {
            errors.push(
                Error::custom(
                    "`on_timeout` needs `wait_for` and `wait_timeout`: it says what happens when \
                     the signal does not come in time; add them, e.g. \
                     `wait_for = \"payment.settled\", wait_timeout = \"1h\"`, or remove `on_timeout`",
                )
                .with_span(&on_timeout.span),
            );
        } else if !args.wrote("wait_timeout") {
            errors.push(
                Error::custom("`on_timeout` needs `wait_timeout`, e.g. `wait_timeout = \"1h\"`; without it the step waits forever")
                    .with_span(&on_timeout.span),
            );
        }
    }

    let wait_for = args.wait_for.as_ref().and_then(|wait_for| {
        let signal = signal_name(&wait_for.name, errors)?;
        Some(WaitForDef {
            signal,
            matches: wait_for.matches.as_ref().map(|m| m.0.clone()),
            timeout_ms: wait_timeout_ms,
            on_timeout: args.on_timeout.map_or(OnTimeout::Pause, |w| w.value),
        })
    });

    StepDef {
        wait_ms: args.wait.map_or(0, |w| w.ms),
        timeout_ms: args.timeout.map(|t| t.ms),
        skip_if: args.skip_if.as_ref().map(|p| p.0.clone()),
        queue: args.queue.as_ref().and_then(|q| queue(q, errors)),
        priority: args.priority.and_then(|p| priority(p, errors)),
        wait_for,
        on_batch_failure: match kind {
            EntryKind::FanOut => Some(
                args.on_batch_failure
                    .map_or(FailureAction::Pause, |w| w.value),
            ),
            EntryKind::Step | EntryKind::Removed => None,
        },
        policies: {
            check_reachable(&args.policies, Level::Step, errors);
            policies(&args.policies, errors)
        },
        rate_limit: args.rate_limit.map(|rate| rate.rate),
    }
}

/// Where a policy list sits: it decides which later policies can never apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Step policies apply in order; the first that matches wins.
    Step,
    /// Workflow policies that name types are tried before blanket ones, whatever
    /// their order; within each group the first that matches wins.
    Workflow,
}

/// A policy that an earlier one always answers first is a mistake: report it
/// where it is written.
fn check_reachable(policies: &[RawPolicy], level: Level, errors: &mut Accumulator) {
    let mut blanket_seen = false;
    let mut named: Vec<String> = Vec::new();
    for policy in policies {
        let shadowed_by_blanket =
            blanket_seen && (policy.matching.is_empty() || level == Level::Step);
        let types: Vec<String> = policy.matching.iter().map(tokens).collect();
        let all_named_before = !types.is_empty() && types.iter().all(|t| named.contains(t));
        if shadowed_by_blanket {
            errors.push(
                Error::custom(
                    "this policy can never apply: an earlier `on_exception` without `matching` \
                     already answers every error; move this one above it or remove it",
                )
                .with_span(&policy.span),
            );
        } else if all_named_before {
            errors.push(
                Error::custom(
                    "this policy can never apply: earlier policies already match all of its error types; \
                     remove it or merge it into the earlier one",
                )
                .with_span(&policy.span),
            );
        }
        if policy.matching.is_empty() {
            blanket_seen = true;
        }
        named.extend(types);
    }
}

fn check_cancel_if(paths: &[syn::Path], errors: &mut Accumulator) {
    let mut seen: Vec<String> = Vec::new();
    for path in paths {
        let text = method_name(path, None);
        if seen.contains(&text) {
            errors.push(
                Error::custom("this `cancel_if` guard is already listed; give it once")
                    .with_span(path),
            );
        }
        seen.push(text);
    }
}

/// A step that takes `StepCx<Order>` in a workflow with no `input` most likely
/// lacks `input = Order`: say so instead of leaving a bare type mismatch.
fn check_missing_input(entries: &[RawEntry], errors: &mut Accumulator) {
    for entry in entries {
        let Some(signature) = &entry.signature else {
            continue;
        };
        let syn::Type::Reference(reference) = &signature.cx_ty else {
            continue;
        };
        let syn::Type::Path(path) = &*reference.elem else {
            continue;
        };
        let Some(last) = path.path.segments.last() else {
            continue;
        };
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            continue;
        };
        let Some(syn::GenericArgument::Type(input)) = args.args.first() else {
            continue;
        };
        let is_unit = matches!(input, syn::Type::Tuple(t) if t.elems.is_empty());
        if !is_unit {
            errors.push(
                Error::custom(format!(
                    "this step takes `StepCx<{}>` but the workflow names no `input`; \
                     add `input = {}` to `#[workflow(...)]`",
                    tokens(input),
                    tokens(input)
                ))
                .with_span(input),
            );
            return;
        }
    }
}

fn policies(raw: &[RawPolicy], errors: &mut Accumulator) -> Vec<PolicyDef> {
    raw.iter()
        .filter_map(|policy| policy_def(policy, errors))
        .collect()
}

fn policy_def(raw: &RawPolicy, errors: &mut Accumulator) -> Option<PolicyDef> {
    let is_reattempt = matches!(raw.action, Some(a) if a.value == ExceptionAction::Reattempt);
    // An `action` that was written but rejected was already reported; what it
    // was meant to be is unknown, so say nothing more about its companions.
    let action_unknown = raw.action_written && raw.action.is_none();
    if !is_reattempt && !action_unknown {
        for (option, span) in [
            ("wait", raw.wait.map(|w| w.0)),
            ("max_reattempts", raw.max_reattempts.map(|m| m.0)),
            ("terminal_action", raw.terminal_action.map(|t| t.0)),
        ] {
            let Some(span) = span else { continue };
            let message = if raw.handler.is_some() {
                format!(
                    "`{option}` does not apply to a `handler`: the handler picks its own verb; remove `{option}`"
                )
            } else {
                format!(
                    "`{option}` only applies to `action = \"reattempt\"`; remove it or use `action = \"reattempt\"`"
                )
            };
            errors.push(Error::custom(message).with_span(&span));
        }
    }

    let max_reattempts = match raw.max_reattempts {
        None => Some(DEFAULT_MAX_REATTEMPTS),
        Some((_, Int { value, span })) => match u32::try_from(value) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                errors.push(
                    Error::custom(format!(
                        "`max_reattempts` must be between 1 and {} (the default is \
                         {DEFAULT_MAX_REATTEMPTS}); to never reattempt, use another `action`, \
                         e.g. `action = \"pause\"`",
                        u32::MAX
                    ))
                    .with_span(&span),
                );
                None
            }
        },
    };

    let action = match (&raw.action, &raw.handler) {
        (Some(_), Some(handler)) => {
            errors.push(
                Error::custom("give either `action` or `handler`, not both: a handler decides the action itself")
                    .with_span(&handler.0),
            );
            return None;
        }
        (None, None) => {
            if raw.reported {
                return None;
            }
            let matching = if raw.matching.is_empty() {
                String::new()
            } else {
                let types: Vec<String> = raw.matching.iter().map(crate::render::code).collect();
                format!("matching({}), ", types.join(", "))
            };
            errors.push(
                Error::custom(format!(
                    "`on_exception` needs `action = \"pause\" | \"reattempt\" | \"cancel\" | \"skip\"` \
                     or `handler = method`, e.g. `on_exception({matching}action = \"pause\")`"
                ))
                .with_span(&raw.span),
            );
            return None;
        }
        (None, Some(handler)) => ActionDef::Handler(handler.0.clone()),
        (Some(action), None) => match action.value {
            ExceptionAction::Pause => ActionDef::Pause,
            ExceptionAction::Cancel => ActionDef::Cancel,
            ExceptionAction::Skip => ActionDef::Skip,
            ExceptionAction::Reattempt => ActionDef::Reattempt {
                wait_ms: raw.wait.map_or(DEFAULT_REATTEMPT_WAIT_MS, |w| w.1.ms),
                max_reattempts: max_reattempts?,
                terminal_action: raw
                    .terminal_action
                    .map_or(FailureAction::Pause, |t| t.1.value),
            },
        },
    };
    Some(PolicyDef {
        matching: raw.matching.clone(),
        action,
        report: raw.report.map_or(Report::Always, |r| r.value),
    })
}

#[cfg(test)]
mod tests;
