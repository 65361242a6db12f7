//! A definition's live steps as a run records them at start, and where each
//! step's first attempt goes.

use super::{NewStep, RunOverrides};
use crate::definition::{Entry, EntryKind, WorkflowDefinition};

/// The live step names of a definition, in order: what a run records at start.
#[must_use]
pub fn live_step_names(definition: &WorkflowDefinition) -> Vec<String> {
    definition
        .entries
        .iter()
        .filter(|entry| entry.kind != EntryKind::Removed)
        .map(|entry| entry.name.to_owned())
        .collect()
}

/// One live step of the definition a run started with, as the run records it
/// (`runs.step_plan`): enough to schedule the step without the definition, which
/// an operator's resume or skip does not have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlannedStep {
    /// The durable step name.
    pub name: String,
    /// Its queue.
    pub queue: String,
    /// Its priority; lower runs first.
    pub priority: i16,
    /// Its own timeout, in milliseconds, if any.
    pub timeout_ms: Option<i64>,
    /// Its `wait` before the first attempt, in milliseconds.
    pub wait_ms: u64,
    /// The signal it waits for (`wait_for`), if any: the claim hands the run's
    /// signals of that name to the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<String>,
}

impl PlannedStep {
    /// The first attempt of this step.
    #[must_use]
    pub fn first_attempt(&self) -> NewStep {
        NewStep {
            step_name: self.name.clone(),
            attempt: 1,
            reattempts: 0,
            queue: self.queue.clone(),
            priority: self.priority,
            timeout_ms: self.timeout_ms,
            delay_ms: self.wait_ms,
        }
    }
}

/// The step plan a run of `definition` records at start: its live steps, in order.
#[must_use]
pub fn step_plan(definition: &WorkflowDefinition) -> Vec<PlannedStep> {
    run_step_plan(definition, &RunOverrides::default())
}

/// The step plan a run of `definition` started with `overrides` records: its
/// live steps, in order, each placed as [`first_attempt_for`] places it (the
/// step's own queue and priority, else the run's, else the workflow's), so an
/// operator's resume or skip, which has only this plan, places a row where
/// the engine would.
#[must_use]
pub fn run_step_plan(
    definition: &WorkflowDefinition,
    overrides: &RunOverrides,
) -> Vec<PlannedStep> {
    definition
        .entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| entry.kind != EntryKind::Removed)
        .map(|(index, entry)| {
            let first = first_attempt_for(definition, index, entry, overrides);
            PlannedStep {
                name: first.step_name,
                queue: first.queue,
                priority: first.priority,
                timeout_ms: first.timeout_ms,
                wait_ms: first.delay_ms,
                wait_for: entry
                    .options
                    .wait_for
                    .as_ref()
                    .map(|wait| wait.signal.to_owned()),
            }
        })
        .collect()
}

/// The first attempt of entry `index`: its queue, priority, timeout and wait.
#[must_use]
pub fn first_attempt(definition: &WorkflowDefinition, index: usize, entry: &Entry) -> NewStep {
    first_attempt_for(definition, index, entry, &RunOverrides::default())
}

/// The first attempt of entry `index` in a run with `overrides`: its queue
/// and priority as [`RunOverrides`] decides, its timeout and wait.
#[must_use]
pub fn first_attempt_for(
    definition: &WorkflowDefinition,
    index: usize,
    entry: &Entry,
    overrides: &RunOverrides,
) -> NewStep {
    let (queue, priority, timeout_ms) = step_placement(definition, Some(index), overrides);
    NewStep {
        step_name: entry.name.to_owned(),
        attempt: 1,
        reattempts: 0,
        queue,
        priority,
        timeout_ms,
        delay_ms: entry.options.wait_ms,
    }
}

/// Queue, priority and timeout of an entry in a run with `overrides`: the
/// entry's own queue and priority, else the run's, else the workflow's.
pub(super) fn step_placement(
    definition: &WorkflowDefinition,
    index: Option<usize>,
    overrides: &RunOverrides,
) -> (String, i16, Option<i64>) {
    let options = index
        .and_then(|i| definition.entries.get(i))
        .map(|entry| &entry.options);
    let queue = options
        .and_then(|o| o.queue)
        .or(overrides.queue.as_deref())
        .unwrap_or(definition.queue)
        .to_owned();
    let priority = options
        .and_then(|o| o.priority)
        .or(overrides.priority)
        .unwrap_or(definition.priority);
    let timeout_ms = options
        .and_then(|o| o.timeout_ms)
        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
    (queue, priority, timeout_ms)
}

/// One entry of a definition as the registry stores it (`definitions.step_plan`)
/// and a definitions document exports it
/// ([`Definitions`](crate::deploy::Definitions)): every entry in declaration
/// order, gravestones included. As JSON:
/// `{"name": "charge", "kind": "step", "queue": "orders", "wait_for": null}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanEntry {
    /// The durable step name.
    pub name: String,
    /// `step`, `fan_out` or `removed` (a gravestone): the digest's words.
    #[serde(with = "entry_kind")]
    pub kind: EntryKind,
    /// The queue its rows go to: the entry's own, else the workflow's (a
    /// gravestone's is the workflow's).
    pub queue: String,
    /// The signal it waits for (`wait_for`), if any; `None` for a gravestone.
    pub wait_for: Option<String>,
}

impl PlanEntry {
    /// Whether it is a gravestone (`removed_step!`).
    #[must_use]
    pub fn is_removed(&self) -> bool {
        self.kind == EntryKind::Removed
    }
}

/// The entries of `definition` as the registry stores them, in declaration
/// order, gravestones included.
#[must_use]
pub fn plan_entries(definition: &WorkflowDefinition) -> Vec<PlanEntry> {
    definition
        .entries
        .iter()
        .map(|entry| PlanEntry {
            name: entry.name.to_owned(),
            kind: entry.kind,
            queue: entry.options.queue.unwrap_or(definition.queue).to_owned(),
            wait_for: (entry.kind != EntryKind::Removed)
                .then(|| entry.options.wait_for.as_ref().map(|w| w.signal.to_owned()))
                .flatten(),
        })
        .collect()
}

/// [`EntryKind`] as its word (`step`, `fan_out`, `removed`); an unknown word
/// is refused with the allowed ones and a did-you-mean.
mod entry_kind {
    use serde::{Deserialize as _, Deserializer, Serializer};

    use crate::definition::EntryKind;

    #[allow(clippy::trivially_copy_pass_by_ref)] // the signature serde's `with` calls
    pub(super) fn serialize<S: Serializer>(kind: &EntryKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EntryKind, D::Error> {
        let word = std::borrow::Cow::<'de, str>::deserialize(d)?;
        EntryKind::parse(&word).map_err(serde::de::Error::custom)
    }
}
