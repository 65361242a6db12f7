//! Starting a run (one or many), and creating a run's rows (a start's or a
//! fan_out child's).

use pgbus_runtime::engine::{BulkStart, RunOverrides, RunStatus, StartPlan, plan_bulk, plan_start};
use pgbus_runtime::store::NewRun;
use pgbus_runtime::{Error, EventKind, RunId, RunSummary, StartOptions, WorkflowDefinition};
use serde_json::Value;

use super::{Rows, Run};

impl Rows {
    /// As the Postgres store's `start_run`: `(run, created)`. The options
    /// are checked on the virtual clock, then the input.
    pub(crate) fn start_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        input: Value,
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        let plan = plan_start(definition, options, self.now)?;
        self.limits.check_input(&input)?;
        Ok(self.start_planned(definition, plan, input, options))
    }

    /// As the Postgres store's `start_many`: every run or none, `(run,
    /// created)` for each in order.
    pub(crate) fn start_many(
        &mut self,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        let planned = plan_bulk(definition, runs, &self.limits, self.now)?;
        let mut started: Vec<(RunId, bool)> = Vec::with_capacity(runs.len());
        for (run, planned) in runs.iter().zip(planned) {
            let one = match planned {
                BulkStart::Own(plan) => {
                    self.start_planned(definition, *plan, run.input.clone(), &run.options)
                }
                BulkStart::SameAs(index) => match started.get(index) {
                    Some(&(run, _)) => (run, false),
                    None => {
                        return Err(Error::Corrupt(format!(
                            "bulk start {index} named before it was started"
                        )));
                    }
                },
            };
            started.push(one);
        }
        Ok(started)
    }

    /// A start `plan` decided: the run holding the options' key if there is
    /// one, else a new run with a `started` event and the options'
    /// concurrency key.
    fn start_planned(
        &mut self,
        definition: &'static WorkflowDefinition,
        plan: StartPlan,
        input: Value,
        options: &StartOptions,
    ) -> (RunId, bool) {
        let key = options.idempotency_key();
        if let Some(key) = key
            && let Some(existing) = self.runs.values().find(|run| {
                run.summary.workflow == definition.name
                    && run.idempotency_key.as_deref() == Some(key)
            })
        {
            return (existing.summary.id, false);
        }
        let keys = (key, options.run_concurrency_key());
        let id = self.create_run(definition, plan, input, keys, None);
        self.event(id, None, EventKind::Started, "client", None);
        (id, true)
    }

    /// The plan of a fan_out child's start (no options); `None` for a
    /// workflow without a step. A child has no deadline, its workflow's
    /// declared one included (as `start_children.sql` writes none): its
    /// parent's cancel, a deadline's included, cancels it.
    pub(super) fn child_plan(&self, definition: &'static WorkflowDefinition) -> Option<StartPlan> {
        plan_start(definition, &StartOptions::new(), self.now)
            .ok()
            .map(|plan| StartPlan {
                deadline: None,
                ..plan
            })
    }

    /// A run row and its first step row as `plan` says, with its
    /// idempotency and concurrency keys, without the `started` event.
    pub(super) fn create_run(
        &mut self,
        definition: &'static WorkflowDefinition,
        plan: StartPlan,
        input: Value,
        (key, concurrency_key): (Option<&str>, Option<&str>),
        parent_batch_id: Option<i64>,
    ) -> RunId {
        let id = RunId(self.next_run);
        self.next_run += 1;
        let mut first = plan.first;
        first.delay_ms = plan.due.delay_from(self.now);
        let deadline_at = plan.deadline.map(|deadline| deadline.at(self.now));
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
                    parent_run: None,
                    children: 0,
                },
                definition_digest: definition.digest.to_owned(),
                options_digest: definition.options_digest.to_owned(),
                input,
                idempotency_key: key.map(str::to_owned),
                concurrency_key: concurrency_key.map(str::to_owned),
                slots: Vec::new(),
                error_class: None,
                error_message: None,
                paused_at: None,
                cancelled_at: None,
                step_names: plan.step_names,
                step_plan: plan.step_plan,
                overrides: plan.overrides,
                parent_batch_id,
                step_ids: Vec::new(),
                events: Vec::new(),
                signals: Vec::new(),
                tick: None,
                deadline_at,
                on_deadline: plan.on_deadline,
            },
        );
        self.insert_step(id, definition.name, &first);
        id
    }

    /// The queue and priority run `id` was started with.
    pub(crate) fn overrides(&self, id: RunId) -> RunOverrides {
        self.runs
            .get(&id.0)
            .map(|run| run.overrides.clone())
            .unwrap_or_default()
    }
}
