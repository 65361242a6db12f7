//! The normalized options as JSON, for the options digest, and the compact
//! text of a path or type it is written with.

use pgbus_core::{FailureAction, Rate};
use quote::ToTokens;
use serde_json::{Value, json};

use crate::model::{ActionDef, FlowDef, PolicyDef, WorkflowDef};

/// The normalized options as JSON, for the options digest: the same value for the
/// same options however they were spelled.
pub(super) fn options_json(def: &WorkflowDef, type_ident: Option<&syn::Ident>) -> Value {
    let method = |path: &syn::Path| method_name(path, type_ident);
    let mut options = json!({
        "name": def.name,
        "input": tokens(&def.input),
        "queue": def.queue,
        "priority": def.priority,
        "cancel_if": def.cancel_if.iter().map(method).collect::<Vec<_>>(),
        "on_exception": def.policies.iter().map(|p| policy_json(p, type_ident)).collect::<Vec<_>>(),
        "entries": def.entries.iter().map(|entry| {
            let o = &entry.options;
            let mut json = json!({
                "name": entry.name,
                "kind": entry.kind.as_str(),
                "wait_ms": o.wait_ms,
                "timeout_ms": o.timeout_ms,
                "skip_if": o.skip_if.as_ref().map(method),
                "queue": o.queue,
                "priority": o.priority,
                "wait_for": o.wait_for.as_ref().map(|w| json!({
                    "signal": w.signal,
                    "matches": w.matches.as_ref().map(method),
                    "timeout_ms": w.timeout_ms,
                    "on_timeout": w.on_timeout.as_str(),
                })),
                "on_batch_failure": o.on_batch_failure.map(FailureAction::as_str),
                "on_exception": o.policies.iter().map(|p| policy_json(p, type_ident)).collect::<Vec<_>>(),
            });
            // Only when declared, as the flow options below.
            if let (Some(rate), Value::Object(map)) = (o.rate_limit, &mut json) {
                map.insert("rate_limit".to_owned(), rate_json(rate));
            }
            json
        }).collect::<Vec<_>>(),
    });
    // Only when declared: a workflow without one keeps the options digest
    // it had before `output` existed.
    if def.output_written
        && let Value::Object(map) = &mut options
    {
        map.insert("output".to_owned(), Value::from(tokens(&def.output)));
    }
    if !def.flow.is_empty()
        && let Value::Object(map) = &mut options
    {
        map.insert("flow".to_owned(), flow_json(&def.flow, type_ident));
    }
    options
}

/// The flow options written, and only those: a workflow that declares none
/// keeps the options digest it had before flow control existed, and one that
/// adds one sees its options drift.
fn flow_json(flow: &FlowDef, type_ident: Option<&syn::Ident>) -> Value {
    let mut map = serde_json::Map::new();
    let mut put = |name: &str, value: Option<Value>| {
        if let Some(value) = value {
            map.insert(name.to_owned(), value);
        }
    };
    put("concurrency", flow.concurrency.map(Value::from));
    put(
        "key",
        flow.key
            .as_ref()
            .map(|path| Value::from(method_name(path, type_ident))),
    );
    put("key_concurrency", flow.key_concurrency.map(Value::from));
    put("slot", flow.slot.map(|slot| Value::from(slot.as_str())));
    put("rate_limit", flow.rate_limit.map(rate_json));
    put("key_rate_limit", flow.key_rate_limit.map(rate_json));
    put("deadline_ms", flow.deadline_ms.map(Value::from));
    put(
        "on_deadline",
        flow.on_deadline.map(|action| Value::from(action.as_str())),
    );
    Value::Object(map)
}

/// A rate as its parts, however it was spelled (`"10/1s"` and `"10/1000ms"`
/// are the same).
fn rate_json(rate: Rate) -> Value {
    json!({ "count": rate.count, "period_ms": rate.period_ms })
}

fn policy_json(policy: &PolicyDef, type_ident: Option<&syn::Ident>) -> Value {
    let action = match &policy.action {
        ActionDef::Pause => json!({ "action": "pause" }),
        ActionDef::Cancel => json!({ "action": "cancel" }),
        ActionDef::Skip => json!({ "action": "skip" }),
        ActionDef::Reattempt {
            wait_ms,
            max_reattempts,
            terminal_action,
        } => json!({
            "action": "reattempt",
            "wait_ms": wait_ms,
            "max_reattempts": max_reattempts,
            "terminal_action": terminal_action.as_str(),
        }),
        ActionDef::Handler(path) => json!({ "handler": method_name(path, type_ident) }),
    };
    json!({
        "matching": policy.matching.iter().map(tokens).collect::<Vec<_>>(),
        "do": action,
        "report": policy.report.as_str(),
    })
}

/// A method path as the options digest sees it: `g`, `Self::g` and `Fulfil::g`
/// (the workflow's own type) are the same method and read `g`; other paths are
/// kept as written.
pub(super) fn method_name(path: &syn::Path, type_ident: Option<&syn::Ident>) -> String {
    if let [owner, method] = path.segments.iter().collect::<Vec<_>>().as_slice()
        && (owner.ident == "Self" || Some(&owner.ident) == type_ident)
        && path.leading_colon.is_none()
    {
        return syn::ext::IdentExt::unraw(&method.ident).to_string();
    }
    match path.get_ident() {
        Some(ident) => syn::ext::IdentExt::unraw(ident).to_string(),
        None => tokens(path),
    }
}

/// A path or type as compact text, e.g. `Self :: is_void` -> `Self::is_void`,
/// `Vec < Order >` -> `Vec<Order>`; a space stays only between two words.
pub(crate) fn tokens(node: &impl ToTokens) -> String {
    let text = node.to_token_stream().to_string();
    let chars: Vec<char> = text.chars().collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '\'';
    chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            c != ' '
                || (i > 0 && i + 1 < chars.len() && is_word(chars[i - 1]) && is_word(chars[i + 1]))
        })
        .map(|(_, &c)| c)
        .collect()
}
