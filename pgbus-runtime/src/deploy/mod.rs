//! The pre-deploy check: a worker's definitions as a JSON document
//! ([`Definitions`]), and what they would do to the runs in flight
//! ([`DeployReport`], from [`Client::deploy_check`](crate::Client::deploy_check)
//! or `pgbus deploy-check FILE`; each run judged by
//! [`engine::deploy_verdict`](crate::engine::deploy_verdict)).
//!
//! The document, format 1:
//!
//! ```json
//! {
//!   "format": 1,
//!   "queues": ["orders"],
//!   "definitions": [
//!     {
//!       "workflow": "orders.fulfil",
//!       "digest": "<64 hex digits>",
//!       "step_plan": [
//!         {"name": "reserve_stock", "kind": "step", "queue": "orders", "wait_for": null},
//!         {"name": "legacy_check", "kind": "removed", "queue": "orders", "wait_for": null},
//!         {"name": "await_payment", "kind": "step", "queue": "orders", "wait_for": "payment.settled"}
//!       ]
//!     }
//!   ]
//! }
//! ```
//!
//! `queues`: the queues the worker claims from. `definitions`: one per
//! workflow, sorted by name; `step_plan` lists every entry in declaration
//! order, gravestones included, exactly as the registry stores it
//! (`definitions.step_plan`; see [`PlanEntry`]). A later version that changes
//! the shape raises `format`; fields it adds within a format are ignored by
//! readers of that format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::definition::WorkflowDefinition;
use crate::engine::{PlanEntry, plan_entries};
use crate::error::Error;

mod report;

pub use report::{
    DeployReport, DigestCheck, LiveDefinition, MAX_DEPLOY_POSITIONS, Position, PositionCheck,
    VerdictCounts, WorkflowCheck,
};

/// The format of the definitions document this version writes and reads.
pub const DEFINITIONS_FORMAT: u32 = 1;

/// The definitions a worker runs, and the queues it claims from, as a JSON
/// document (see the [module docs](self) for the format): what
/// `pgbus deploy-check` compares with the runs in flight before a deploy.
///
/// Made without a database by [`Definitions::of`] (for a
/// `--print-definitions` flag that exits before connecting), or from a built
/// worker by [`Worker::definitions`](crate::Worker::definitions); written by
/// [`Definitions::to_json`], read back (and checked) by [`Definitions::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Definitions {
    /// [`DEFINITIONS_FORMAT`].
    pub format: u32,
    /// The queues the worker claims from, sorted.
    pub queues: Vec<String>,
    /// One per workflow, sorted by name.
    pub definitions: Vec<ExportedDefinition>,
}

/// One workflow's definition in a [`Definitions`] document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedDefinition {
    /// The workflow's name.
    pub workflow: String,
    /// Its definition digest (SHA-256 of its `[name, kind]` list, 64
    /// lowercase hex digits).
    pub digest: String,
    /// Every entry, in declaration order, gravestones included.
    pub step_plan: Vec<PlanEntry>,
}

/// The document as read, before its checks.
#[derive(Deserialize)]
struct Raw {
    queues: Vec<String>,
    definitions: Vec<ExportedDefinition>,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidDefinitions {
        reason: reason.into(),
    }
}

impl Definitions {
    /// The document of a worker that registers `definitions` (a second of one
    /// name replaces the first, as registering it again does) and claims from
    /// every queue their steps use, as a worker does unless given queues
    /// ([`Definitions::with_queues`] sets them). No database needed:
    ///
    /// ```
    /// # use pgbus_runtime::prelude::*;
    /// # struct Fulfil;
    /// # #[workflow(name = "orders.fulfil", queue = "orders")]
    /// # impl Fulfil { #[step] async fn charge(&self, _cx: &mut StepCx<()>) {} }
    /// use pgbus_runtime::deploy::Definitions;
    ///
    /// let document = Definitions::of([Fulfil::DEFINITION]);
    /// assert_eq!(document.queues, ["orders"]);
    /// assert_eq!(Definitions::parse(&document.to_json()).unwrap(), document);
    /// ```
    #[must_use]
    pub fn of<'a>(definitions: impl IntoIterator<Item = &'a WorkflowDefinition>) -> Self {
        let mut by_name = BTreeMap::new();
        let mut queues = Vec::new();
        for definition in definitions {
            by_name.insert(definition.name, definition);
        }
        for definition in by_name.values() {
            queues.push(definition.queue.to_owned());
            queues.extend(
                definition
                    .entries
                    .iter()
                    .filter_map(|e| e.options.queue)
                    .map(str::to_owned),
            );
        }
        queues.sort();
        queues.dedup();
        Self {
            format: DEFINITIONS_FORMAT,
            queues,
            definitions: by_name
                .values()
                .map(|definition| ExportedDefinition {
                    workflow: definition.name.to_owned(),
                    digest: definition.digest.to_owned(),
                    step_plan: plan_entries(definition),
                })
                .collect(),
        }
    }

    /// The same definitions, for a worker that claims from `queues` (as
    /// `WorkerBuilder::queue` sets them); none keeps every queue of the
    /// definitions.
    #[must_use]
    pub fn with_queues<Q: Into<String>>(mut self, queues: impl IntoIterator<Item = Q>) -> Self {
        let mut queues: Vec<String> = queues.into_iter().map(Into::into).collect();
        if !queues.is_empty() {
            queues.sort();
            queues.dedup();
            self.queues = queues;
        }
        self
    }

    /// The definition of `workflow`, if the document has one.
    #[must_use]
    pub fn definition(&self, workflow: &str) -> Option<&ExportedDefinition> {
        self.definitions.iter().find(|d| d.workflow == workflow)
    }

    /// The document as pretty-printed JSON, ending with a line break.
    #[must_use]
    pub fn to_json(&self) -> String {
        // Strings, numbers and lists only: serializing cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a document written by [`Definitions::to_json`] (by this or an
    /// earlier version of the same format), and checks it.
    ///
    /// # Errors
    /// [`Error::InvalidDefinitions`], saying what is wrong: not JSON (with
    /// the line and column), no `format` or one this version does not read,
    /// a missing or ill-typed field, an unknown entry kind, no queue or no
    /// definition, a workflow or step given twice, or a digest that does not
    /// match its entries (a document edited by hand).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let format = match value.get("format") {
            None => {
                return Err(invalid(
                    "no `format` field: not a definitions document (write one with `Definitions::to_json`, e.g. from a `--print-definitions` flag)",
                ));
            }
            Some(format) => format.as_u64(),
        };
        if format != Some(u64::from(DEFINITIONS_FORMAT)) {
            let found = value
                .get("format")
                .map(Value::to_string)
                .unwrap_or_default();
            return Err(invalid(format!(
                "format {found} is not one this version reads ({DEFINITIONS_FORMAT}); export the definitions with the pgbus version of this check"
            )));
        }
        let raw: Raw = serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        let document = Self {
            format: DEFINITIONS_FORMAT,
            queues: raw.queues,
            definitions: raw.definitions,
        };
        document.check()?;
        Ok(document)
    }

    /// What [`Definitions::parse`] checks beyond the shape.
    fn check(&self) -> Result<(), Error> {
        if self.queues.is_empty() || self.queues.iter().any(|q| q.trim().is_empty()) {
            return Err(invalid(
                "`queues` must list the queues the worker claims from, none of them blank",
            ));
        }
        if self.definitions.is_empty() {
            return Err(invalid(
                "`definitions` is empty: a worker runs at least one workflow",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for definition in &self.definitions {
            let name = &definition.workflow;
            if name.is_empty() {
                return Err(invalid("a definition has an empty `workflow` name"));
            }
            if !seen.insert(name.as_str()) {
                return Err(invalid(format!("workflow `{name}` is defined twice")));
            }
            if definition.step_plan.is_empty() {
                return Err(invalid(format!("workflow `{name}` has no entries")));
            }
            let mut steps = std::collections::BTreeSet::new();
            for entry in &definition.step_plan {
                if !steps.insert(entry.name.as_str()) {
                    return Err(invalid(format!(
                        "workflow `{name}` has step `{}` twice",
                        entry.name
                    )));
                }
            }
            let digest = pgbus_core::definition_digest(
                definition
                    .step_plan
                    .iter()
                    .map(|entry| (entry.name.as_str(), entry.kind)),
            );
            if digest != definition.digest {
                return Err(invalid(format!(
                    "the digest of workflow `{name}` does not match its entries (expected {digest}): export the document again rather than edit it"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
