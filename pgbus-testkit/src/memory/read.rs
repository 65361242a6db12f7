//! Reading runs: one run, its status, a filtered list, and a run's outputs.

use std::collections::BTreeMap;

use pgbus_runtime::engine::{BatchStatus, RunStatus, StepStatus};
use pgbus_runtime::{
    BatchView, Error, RunCounts, RunFilter, RunId, RunRead, RunSummary, RunView, Unrunnable,
};
use serde_json::Value;

use super::{Rows, Run};

impl Rows {
    /// As `Client::run_with`: the whole run, cut as `read` says.
    pub(crate) fn run(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        let lost_ms = read.lost_ms();
        let unrunnable = self.unrunnable(run, lost_ms);
        let summary = RunSummary {
            unrunnable: unrunnable.as_ref().map(|u| u.missing),
            ..self.related(run)
        };
        Ok(read.cut(RunView {
            parent_run_id: summary.parent_run,
            parent_step: self.parent_step(run),
            run: summary,
            definition_digest: run.definition_digest.clone(),
            options_digest: run.options_digest.clone(),
            step_plan: Some(run.step_plan.clone()),
            input: run.input.clone(),
            idempotency_key: run.idempotency_key.clone(),
            concurrency_key: run.concurrency_key.clone(),
            deadline_at: run.deadline_at,
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
            paused_at: run.paused_at,
            cancelled_at: run.cancelled_at,
            steps: run
                .step_ids
                .iter()
                .filter_map(|id| self.steps.get(id))
                .map(|step| step.view.clone())
                .collect(),
            events: run.events.clone(),
            parent_batch_id: run.parent_batch_id,
            signals: run.signals.clone(),
            batches: self
                .batches
                .values()
                .filter(|b| b.run_id == run_id)
                .map(|b| BatchView {
                    unrunnable_child: self.unrunnable_child(b.view.id, b.view.status, lost_ms),
                    ..b.view.clone()
                })
                .collect(),
            counts: RunCounts::default(),
            omitted: Vec::new(),
            unrunnable,
        }))
    }

    /// As `get_run.sql`'s `unrunnable`: a `ready` run's due row (the latest
    /// attempt of its current step, `scheduled` or `waiting`, due by now)
    /// when no live worker can run it.
    fn unrunnable(&self, run: &Run, lost_ms: i64) -> Option<Unrunnable> {
        if run.summary.status != RunStatus::Ready {
            return None;
        }
        let current = run.summary.current_step.as_deref()?;
        let row = run
            .step_ids
            .iter()
            .filter_map(|id| self.steps.get(id))
            .filter(|step| step.view.step_name == current)
            .max_by_key(|step| step.view.attempt)?;
        let due = matches!(row.view.status, StepStatus::Scheduled | StepStatus::Waiting)
            && row.view.scheduled_at <= self.now;
        if !due {
            return None;
        }
        let missing = self.missing(&row.workflow, &row.view.step_name, &row.view.queue, lost_ms)?;
        Some(Unrunnable::new(
            row.view.id,
            row.workflow.clone(),
            row.view.step_name.clone(),
            row.view.queue.clone(),
            missing,
            row.view.scheduled_at,
        ))
    }

    /// As `run_batches.sql`'s `unrunnable_child`: of an open batch, the
    /// lowest id among its first `BatchView::CHILDREN_CHECKED` children
    /// that no live worker can run.
    fn unrunnable_child(&self, batch: i64, status: BatchStatus, lost_ms: i64) -> Option<RunId> {
        if status != BatchStatus::Open {
            return None;
        }
        let checked = usize::try_from(BatchView::CHILDREN_CHECKED).unwrap_or(usize::MAX);
        self.runs
            .values()
            .filter(|run| run.parent_batch_id == Some(batch))
            .take(checked)
            .find(|run| self.unrunnable(run, lost_ms).is_some())
            .map(|run| run.summary.id)
    }

    /// A run's status, if it exists.
    pub(crate) fn run_status(&self, run_id: RunId) -> Option<RunStatus> {
        self.runs.get(&run_id.0).map(|run| run.summary.status)
    }

    /// The run's summary with `parent_run` and `children` read from the
    /// batches, as `list_runs.sql` and `get_run.sql` read them.
    pub(super) fn related(&self, run: &Run) -> RunSummary {
        let parent_run = run
            .parent_batch_id
            .and_then(|batch| self.batches.get(&batch))
            .map(|batch| batch.run_id);
        let children = self
            .batches
            .values()
            .filter(|batch| batch.run_id == run.summary.id)
            .map(|batch| i64::from(batch.view.total))
            .sum();
        RunSummary {
            parent_run,
            children,
            ..run.summary.clone()
        }
    }

    /// As `get_run.sql`'s `parent_step`: the name of the step whose batch
    /// the run counts toward.
    fn parent_step(&self, run: &Run) -> Option<String> {
        let batch = self.batches.get(&run.parent_batch_id?)?;
        let step = self.steps.get(&batch.view.parent_step_id)?;
        Some(step.view.step_name.clone())
    }

    /// As `Client::list_runs`: the page `filter` asks for, newest first.
    /// Errors: [`Error::InvalidInputPath`] for an input path outside what
    /// the memory store reads (see [`super::path`]).
    pub(crate) fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        let lost_ms = filter.lost_ms();
        let limit = usize::try_from(filter.page_size()).unwrap_or(100);
        let path = filter
            .input_path
            .as_deref()
            .map(super::path::Path::parse)
            .transpose()?;
        let scan = usize::try_from(RunFilter::INPUT_SCAN).unwrap_or(usize::MAX);
        let kept = |run: &&Run| {
            filter.before.is_none_or(|before| run.summary.id < before)
                && filter.after.is_none_or(|after| run.summary.id > after)
                && filter.keeps(&self.related(run), run.idempotency_key.as_deref())
        };
        let candidates: Vec<&Run> = if filter.after.is_some() {
            self.runs.values().filter(kept).collect()
        } else {
            self.runs.values().rev().filter(kept).collect()
        };
        let mut page: Vec<RunSummary> = candidates
            .into_iter()
            .take(if path.is_some() { scan } else { limit })
            .filter(|run| path.as_ref().is_none_or(|p| p.matches(&run.input)))
            .take(limit)
            .map(|run| RunSummary {
                unrunnable: self.unrunnable(run, lost_ms).map(|u| u.missing),
                ..self.related(run)
            })
            .collect();
        page.sort_by_key(|run| std::cmp::Reverse(run.id));
        Ok(page)
    }

    pub(super) fn outputs(&self, run_id: RunId) -> BTreeMap<String, Value> {
        let mut outputs: BTreeMap<String, (i32, Value)> = BTreeMap::new();
        let rows = self
            .runs
            .get(&run_id.0)
            .map(|run| run.step_ids.as_slice())
            .unwrap_or_default();
        for step in rows.iter().filter_map(|id| self.steps.get(id)) {
            if !matches!(
                step.view.status,
                StepStatus::Completed | StepStatus::Skipped
            ) {
                continue;
            }
            let Some(output) = &step.view.output else {
                continue;
            };
            let newer = outputs
                .get(&step.view.step_name)
                .is_none_or(|(attempt, _)| *attempt < step.view.attempt);
            if newer {
                outputs.insert(
                    step.view.step_name.clone(),
                    (step.view.attempt, output.clone()),
                );
            }
        }
        outputs
            .into_iter()
            .map(|(name, (_, output))| (name, output))
            .collect()
    }
}
