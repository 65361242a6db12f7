//! Checking overrides with the macro's rules, and deriving the definition in
//! force: the source's, with the overridden values, its own options JSON and
//! options digest, the same definition digest.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock, PoisonError};

use pgbus_core::{EntryKind, Rate, parse_duration_ms, parse_rate, rules};
use serde_json::{Map, Value, json};

use super::{StepOverrides, WorkflowOverrides};
use crate::definition::{Entry, WorkflowDefinition};
use crate::error::Error;

/// A workflow's overrides, every value checked and normalized.
#[derive(Debug, Default)]
pub(super) struct Checked {
    queue: Option<String>,
    priority: Option<i16>,
    concurrency: Option<u32>,
    key_concurrency: Option<u32>,
    rate_limit: Option<Rate>,
    key_rate_limit: Option<Rate>,
    deadline_ms: Option<u64>,
    steps: BTreeMap<String, CheckedStep>,
}

/// A step's overrides, every value checked and normalized.
#[derive(Debug, Default)]
struct CheckedStep {
    wait_ms: Option<u64>,
    timeout_ms: Option<u64>,
    wait_timeout_ms: Option<u64>,
    queue: Option<String>,
    priority: Option<i16>,
    rate_limit: Option<Rate>,
}

impl CheckedStep {
    const fn is_empty(&self) -> bool {
        self.wait_ms.is_none()
            && self.timeout_ms.is_none()
            && self.wait_timeout_ms.is_none()
            && self.queue.is_none()
            && self.priority.is_none()
            && self.rate_limit.is_none()
    }
}

impl Checked {
    fn is_empty(&self) -> bool {
        self.queue.is_none()
            && self.priority.is_none()
            && self.concurrency.is_none()
            && self.key_concurrency.is_none()
            && self.rate_limit.is_none()
            && self.key_rate_limit.is_none()
            && self.deadline_ms.is_none()
            && self.steps.values().all(CheckedStep::is_empty)
    }
}

/// The refusal of `option` of `workflow` (and `step`), for `reason`.
fn refused(workflow: &str, step: Option<&str>, option: &'static str, reason: &str) -> Error {
    super::OverrideRefused::error(workflow, step, option, reason.to_owned())
}

/// Reads one value: `None` stays `None`, a value is checked by `rule`, whose
/// message is the refusal's reason.
fn value<T, U>(
    given: Option<&T>,
    rule: impl FnOnce(&T) -> Result<U, String>,
    refuse: impl FnOnce(&str) -> Error,
) -> Result<Option<U>, Error>
where
    T: ?Sized,
{
    given
        .map(rule)
        .transpose()
        .map_err(|reason| refuse(&reason))
}

fn duration(option: &str, text: &str) -> Result<u64, String> {
    parse_duration_ms(text).map_err(|error| format!("invalid `{option}`: {error}"))
}

fn rate(option: &str, text: &str) -> Result<Rate, String> {
    parse_rate(text).map_err(|error| format!("invalid `{option}`: {error}"))
}

fn queue(text: &str) -> Result<String, String> {
    rules::check_queue(text)
        .map(|()| text.to_owned())
        .map_err(str::to_owned)
}

fn positive(
    option: &str,
    text: &str,
    rule: fn(u64) -> Result<u64, &'static str>,
) -> Result<u64, String> {
    rule(duration(option, text)?).map_err(str::to_owned)
}

/// Checks every value of `overrides` (of `workflow`) with the macro's rules.
pub(super) fn check(workflow: &str, overrides: &WorkflowOverrides) -> Result<Checked, Error> {
    let at = |option: &'static str| move |reason: &str| refused(workflow, None, option, reason);
    let limit = |option: &'static str| move |n: &i64| rules::check_concurrency(option, (*n).into());
    let mut steps = BTreeMap::new();
    for (name, step) in &overrides.steps {
        steps.insert(name.clone(), check_step(workflow, name, step)?);
    }
    Ok(Checked {
        queue: value(overrides.queue.as_deref(), queue, at("queue"))?,
        priority: value(
            overrides.priority.as_ref(),
            |p| rules::check_priority((*p).into()),
            at("priority"),
        )?,
        concurrency: value(
            overrides.concurrency.as_ref(),
            limit("concurrency"),
            at("concurrency"),
        )?,
        key_concurrency: value(
            overrides.key_concurrency.as_ref(),
            limit("key_concurrency"),
            at("key_concurrency"),
        )?,
        rate_limit: value(
            overrides.rate_limit.as_deref(),
            |r| rate("rate_limit", r),
            at("rate_limit"),
        )?,
        key_rate_limit: value(
            overrides.key_rate_limit.as_deref(),
            |r| rate("key_rate_limit", r),
            at("key_rate_limit"),
        )?,
        deadline_ms: value(
            overrides.deadline.as_deref(),
            |d| positive("deadline", d, rules::check_deadline_ms),
            at("deadline"),
        )?,
        steps,
    })
}

fn check_step(workflow: &str, step: &str, overrides: &StepOverrides) -> Result<CheckedStep, Error> {
    let at =
        |option: &'static str| move |reason: &str| refused(workflow, Some(step), option, reason);
    Ok(CheckedStep {
        wait_ms: value(
            overrides.wait.as_deref(),
            |w| duration("wait", w),
            at("wait"),
        )?,
        timeout_ms: value(
            overrides.timeout.as_deref(),
            |t| positive("timeout", t, rules::check_timeout_ms),
            at("timeout"),
        )?,
        wait_timeout_ms: value(
            overrides.wait_timeout.as_deref(),
            |t| positive("wait_timeout", t, rules::check_wait_timeout_ms),
            at("wait_timeout"),
        )?,
        queue: value(overrides.queue.as_deref(), queue, at("queue"))?,
        priority: value(
            overrides.priority.as_ref(),
            |p| rules::check_priority((*p).into()),
            at("priority"),
        )?,
        rate_limit: value(
            overrides.rate_limit.as_deref(),
            |r| rate("rate_limit", r),
            at("rate_limit"),
        )?,
    })
}

/// Checks that every overridden step is a live entry of `definition` that
/// takes the options given.
fn fit(definition: &WorkflowDefinition, checked: &Checked) -> Result<(), Error> {
    let workflow = definition.name;
    for (name, step) in &checked.steps {
        let Some((_, entry)) = definition.entry(name) else {
            let names: Vec<&str> = definition
                .entries
                .iter()
                .filter(|entry| entry.kind != EntryKind::Removed)
                .map(|entry| entry.name)
                .collect();
            let hint = pgbus_core::closest(name, names.iter().copied())
                .map(|found| format!("; did you mean `{found}`?"))
                .unwrap_or_default();
            return Err(refused(
                workflow,
                Some(name),
                "step",
                &format!(
                    "this workflow has no step `{name}` (its steps: {}); name a step by its \
                     durable name{hint}",
                    listed(&names)
                ),
            ));
        };
        match entry.kind {
            EntryKind::Removed => {
                return Err(refused(
                    workflow,
                    Some(name),
                    "step",
                    &format!(
                        "step `{name}` is a gravestone (`removed_step!`): it never runs, so it \
                         has no options to override; remove its overrides"
                    ),
                ));
            }
            EntryKind::FanOut if step.wait_timeout_ms.is_some() => {
                return Err(refused(
                    workflow,
                    Some(name),
                    "wait_timeout",
                    "`wait_timeout` is not allowed on a `#[fan_out]`: a fan_out waits for its \
                     child runs, not for a signal; remove it",
                ));
            }
            EntryKind::Step | EntryKind::FanOut => {}
        }
        if step.wait_timeout_ms.is_some()
            && let Err(reason) = rules::check_wait_timeout_place(entry.options.wait_for.is_some())
        {
            return Err(refused(
                workflow,
                Some(name),
                "wait_timeout",
                &format!("{reason}; step `{name}` waits for no signal, so remove the override"),
            ));
        }
    }
    Ok(())
}

/// The source definition an override was derived from, and the overrides.
type Key = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    WorkflowOverrides,
);

/// The definitions derived so far in this process: each kept for good (a
/// definition is `'static`, as the source's is), so each source definition
/// and set of overrides is derived, and its memory taken, once.
static DERIVED: OnceLock<Mutex<HashMap<Key, &'static WorkflowDefinition>>> = OnceLock::new();

/// The definition in force for `definition` with `overrides`.
pub(super) fn derived(
    definition: &'static WorkflowDefinition,
    overrides: &WorkflowOverrides,
) -> Result<&'static WorkflowDefinition, Error> {
    let key: Key = (
        definition.name,
        definition.type_name,
        definition.digest,
        definition.options_digest,
        overrides.clone(),
    );
    let table = DERIVED.get_or_init(Mutex::default);
    if let Some(found) = table
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(found);
    }
    let checked = check(definition.name, overrides)?;
    fit(definition, &checked)?;
    if checked.is_empty() {
        return Ok(definition);
    }
    let new: &'static WorkflowDefinition = Box::leak(Box::new(derive(definition, &checked)));
    Ok(table
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert(new))
}

/// `a`, `b`, `c`, each in backticks.
fn listed(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    quoted.join(", ")
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// `definition` with `checked` applied (the steps were found by [`fit`]).
fn derive(definition: &'static WorkflowDefinition, checked: &Checked) -> WorkflowDefinition {
    let mut entries: Vec<Entry> = definition.entries.to_vec();
    for entry in &mut entries {
        let Some(step) = checked.steps.get(entry.name) else {
            continue;
        };
        let options = &mut entry.options;
        options.wait_ms = step.wait_ms.unwrap_or(options.wait_ms);
        options.timeout_ms = step.timeout_ms.or(options.timeout_ms);
        if let Some(queue) = &step.queue {
            options.queue = Some(leak(queue.clone()));
        }
        options.priority = step.priority.or(options.priority);
        options.rate_limit = step.rate_limit.or(options.rate_limit);
        if let (Some(ms), Some(wait_for)) = (step.wait_timeout_ms, &mut options.wait_for) {
            wait_for.timeout_ms = Some(ms);
        }
    }
    let mut flow = definition.flow;
    flow.concurrency = checked.concurrency.or(flow.concurrency);
    flow.key_concurrency = checked.key_concurrency.or(flow.key_concurrency);
    flow.rate_limit = checked.rate_limit.or(flow.rate_limit);
    flow.key_rate_limit = checked.key_rate_limit.or(flow.key_rate_limit);
    flow.deadline_ms = checked.deadline_ms.or(flow.deadline_ms);
    let options_json = options_json(definition.options_json, checked).to_string();
    WorkflowDefinition {
        queue: checked.queue.clone().map_or(definition.queue, leak),
        priority: checked.priority.unwrap_or(definition.priority),
        entries: Box::leak(entries.into_boxed_slice()),
        flow,
        options_digest: leak(pgbus_core::sha256_hex(options_json.as_bytes())),
        options_json: leak(options_json),
        ..*definition
    }
}

fn rate_json(rate: Rate) -> Value {
    json!({ "count": rate.count, "period_ms": rate.period_ms })
}

/// Inserts `value` under `key` when there is one.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

/// The source's options JSON with the overridden values in place (as the
/// macro writes them: durations in milliseconds, rates as their parts) and
/// an `"overrides"` key listing what was overridden: what the options digest
/// of the definition in force hashes.
fn options_json(source: &str, checked: &Checked) -> Value {
    let mut options = match serde_json::from_str(source) {
        Ok(Value::Object(map)) => map,
        // A definition written by hand may have no options JSON.
        _ => Map::new(),
    };
    put(
        &mut options,
        "queue",
        checked.queue.clone().map(Value::from),
    );
    put(&mut options, "priority", checked.priority.map(Value::from));
    let mut flow = Map::new();
    put(
        &mut flow,
        "concurrency",
        checked.concurrency.map(Value::from),
    );
    put(
        &mut flow,
        "key_concurrency",
        checked.key_concurrency.map(Value::from),
    );
    put(&mut flow, "rate_limit", checked.rate_limit.map(rate_json));
    put(
        &mut flow,
        "key_rate_limit",
        checked.key_rate_limit.map(rate_json),
    );
    put(
        &mut flow,
        "deadline_ms",
        checked.deadline_ms.map(Value::from),
    );
    if !flow.is_empty() {
        let declared = options
            .entry("flow")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(declared) = declared {
            declared.extend(flow.clone());
        }
    }
    let mut steps = Map::new();
    if let Some(Value::Array(entries)) = options.get_mut("entries") {
        for entry in entries.iter_mut() {
            let Some(name) = entry.get("name").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            let Some(step) = checked.steps.get(&name).filter(|step| !step.is_empty()) else {
                continue;
            };
            let given = step_json(step);
            if let Value::Object(entry) = entry {
                write_step(entry, &given);
            }
            steps.insert(name, Value::Object(given));
        }
    }
    // Steps the options JSON does not list (a definition written by hand).
    for (name, step) in &checked.steps {
        if !step.is_empty() && !steps.contains_key(name) {
            steps.insert(name.clone(), Value::Object(step_json(step)));
        }
    }
    let mut given = Map::new();
    put(&mut given, "queue", checked.queue.clone().map(Value::from));
    put(&mut given, "priority", checked.priority.map(Value::from));
    given.extend(flow);
    if !steps.is_empty() {
        given.insert("steps".to_owned(), Value::Object(steps));
    }
    options.insert("overrides".to_owned(), Value::Object(given));
    Value::Object(options)
}

/// A step's overrides as the options JSON records them.
fn step_json(step: &CheckedStep) -> Map<String, Value> {
    let mut map = Map::new();
    put(&mut map, "wait_ms", step.wait_ms.map(Value::from));
    put(&mut map, "timeout_ms", step.timeout_ms.map(Value::from));
    put(
        &mut map,
        "wait_timeout_ms",
        step.wait_timeout_ms.map(Value::from),
    );
    put(&mut map, "queue", step.queue.clone().map(Value::from));
    put(&mut map, "priority", step.priority.map(Value::from));
    put(&mut map, "rate_limit", step.rate_limit.map(rate_json));
    map
}

/// Writes a step's overrides into its entry of the options JSON, under the
/// keys the macro uses (`wait_for.timeout_ms` for `wait_timeout_ms`).
fn write_step(entry: &mut Map<String, Value>, given: &Map<String, Value>) {
    for (key, value) in given {
        if key == "wait_timeout_ms" {
            if let Some(Value::Object(wait_for)) = entry.get_mut("wait_for") {
                wait_for.insert("timeout_ms".to_owned(), value.clone());
            }
        } else {
            entry.insert(key.clone(), value.clone());
        }
    }
}
