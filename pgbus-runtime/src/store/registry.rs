//! What a worker registers: the definitions it runs, as claims filter on them
//! and the registry (`definitions`, `worker_definitions`) stores them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::definition::WorkflowDefinition;

/// The workflows a worker registered, as its claims read them: for each, the
/// digest of the worker's definition and the durable name of every entry that
/// definition holds: steps, fan-outs and gravestones (a gravestone is *had*: a
/// claim of its row skips it). A worker claims only rows whose workflow and
/// step it has (see [`Claimer`](super::Claimer)); a row it lacks waits for a
/// worker that has it.
#[derive(Debug, Clone, Default)]
pub struct Registered {
    names: Vec<String>,
    workflows: BTreeMap<String, Held>,
    /// `{"<workflow>": {"digest": "<hex>", "steps": ["<name>", ...]}}`: what
    /// the Postgres claim binds.
    json: Value,
}

#[derive(Debug, Clone)]
struct Held {
    digest: String,
    steps: BTreeSet<String>,
}

impl Registered {
    /// What a worker of `definitions` can run. A second definition of a name
    /// replaces the first, as registering it again does.
    #[must_use]
    pub fn of<'a>(definitions: impl IntoIterator<Item = &'a WorkflowDefinition>) -> Self {
        let mut workflows = BTreeMap::new();
        for definition in definitions {
            workflows.insert(
                definition.name.to_owned(),
                Held {
                    digest: definition.digest.to_owned(),
                    steps: definition
                        .entries
                        .iter()
                        .map(|entry| entry.name.to_owned())
                        .collect(),
                },
            );
        }
        let json = Value::Object(
            workflows
                .iter()
                .map(|(name, held)| {
                    (
                        name.clone(),
                        json!({ "digest": held.digest, "steps": held.steps }),
                    )
                })
                .collect(),
        );
        Self {
            names: workflows.keys().cloned().collect(),
            workflows,
            json,
        }
    }

    /// The registered workflows' names, sorted.
    #[must_use]
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `workflow` is registered.
    #[must_use]
    pub fn has_workflow(&self, workflow: &str) -> bool {
        self.workflows.contains_key(workflow)
    }

    /// Whether the registered definition of `workflow` holds an entry named
    /// `step` (a gravestone included).
    #[must_use]
    pub fn has_step(&self, workflow: &str, step: &str) -> bool {
        self.workflows
            .get(workflow)
            .is_some_and(|held| held.steps.contains(step))
    }

    /// The digest of the registered definition of `workflow`.
    #[must_use]
    pub fn digest(&self, workflow: &str) -> Option<&str> {
        self.workflows
            .get(workflow)
            .map(|held| held.digest.as_str())
    }

    /// As JSON: `{"<workflow>": {"digest": "<hex>", "steps": ["<name>", ...]}}`,
    /// each workflow's step names sorted.
    #[must_use]
    pub const fn as_json(&self) -> &Value {
        &self.json
    }
}

/// A worker's entry in the registry: who it is, where it runs, what it claims
/// from and what it runs. Written by
/// [`Store::register_worker`](super::Store::register_worker) before the
/// worker's first claim, and again whenever its row went missing.
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    /// The id written on the rows it claims (unique per process).
    pub worker_id: &'a str,
    /// Its stable name, for logs, the registry and the dashboard
    /// (`WorkerBuilder::name`; the id by default).
    pub name: &'a str,
    /// The host it runs on.
    pub host: &'a str,
    /// Its process id.
    pub pid: i32,
    /// The queues it claims from.
    pub queues: &'a [String],
    /// How many step bodies it runs at once.
    pub concurrency: usize,
    /// The definitions it runs, one per workflow.
    pub definitions: &'a [&'static WorkflowDefinition],
    /// The queue concurrency limits it declares
    /// (`WorkerBuilder::queue_concurrency`): `(queue, limit)`.
    pub queue_limits: &'a [(String, u32)],
}

/// A definition's entries as the registry stores them (`definitions.step_plan`):
/// a JSON array, in declaration order, gravestones included, of
/// `{"name", "kind", "queue", "wait_for"}`: `kind` is `step`, `fan_out` or
/// `removed` (the digest's words); `queue` the entry's own queue, else the
/// workflow's; `wait_for` the signal the step waits for, or `null`.
#[must_use]
pub fn registered_plan(definition: &WorkflowDefinition) -> Value {
    // A list of plain structs of strings: serializing it cannot fail.
    serde_json::to_value(crate::engine::plan_entries(definition)).unwrap_or_default()
}
