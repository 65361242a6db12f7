//! Starting a run, and creating a run's rows (a start's or a fan_out child's).

use pgbus_runtime::engine::{RunStatus, first_attempt};
use pgbus_runtime::{Error, EventKind, RunId, RunSummary, WorkflowDefinition};
use serde_json::Value;

use super::{Rows, Run};

impl Rows {
    /// As the Postgres store's `start_run`: `(run, created)`.
    pub(crate) fn start_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        input: Value,
        key: Option<&str>,
    ) -> Result<(RunId, bool), Error> {
        let Some((index, entry)) = definition.first_step() else {
            return Err(Error::NoSteps {
                workflow: definition.name.to_owned(),
            });
        };
        if let Some(key) = key
            && let Some(existing) = self.runs.values().find(|run| {
                run.summary.workflow == definition.name
                    && run.idempotency_key.as_deref() == Some(key)
            })
        {
            return Ok((existing.summary.id, false));
        }
        let id = self.create_run(definition, index, entry, input, key, None);
        self.event(id, None, EventKind::Started, "client", None);
        Ok((id, true))
    }

    /// A run row and its first step row, without the `started` event.
    pub(super) fn create_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        index: usize,
        entry: &'static pgbus_runtime::Entry,
        input: Value,
        key: Option<&str>,
        parent_batch_id: Option<i64>,
    ) -> RunId {
        let id = RunId(self.next_run);
        self.next_run += 1;
        let first = first_attempt(definition, index, entry);
        self.runs.insert(
            id.0,
            Run {
                summary: RunSummary {
                    id,
                    workflow: definition.name.to_owned(),
                    status: RunStatus::Ready,
                    current_step: Some(first.step_name.clone()),
                    created_at: self.now,
                    updated_at: self.now,
                    finished_at: None,
                    unrunnable: None,
                },
                definition_digest: definition.digest.to_owned(),
                options_digest: definition.options_digest.to_owned(),
                input,
                idempotency_key: key.map(str::to_owned),
                error_class: None,
                error_message: None,
                paused_at: None,
                cancelled_at: None,
                step_names: pgbus_runtime::engine::live_step_names(definition),
                step_plan: pgbus_runtime::engine::step_plan(definition),
                parent_batch_id,
                step_ids: Vec::new(),
                events: Vec::new(),
                signals: Vec::new(),
                tick: None,
            },
        );
        self.insert_step(id, definition.name, &first);
        id
    }
}
