//! A run as a wait for its result reads it, as `run_result.sql` does.

use pgbus_runtime::engine::RunStatus;
use pgbus_runtime::view::REASON_EVENTS_READ;
use pgbus_runtime::{Error, LastAttempt, ResultView, RunId};

use super::Rows;

impl Rows {
    /// As `Store::run_result`: the run's row; for a finished run its latest
    /// attempt (the highest row id); for a cancelled or paused one the
    /// reason of the latest event named after its status among its latest
    /// [`REASON_EVENTS_READ`] events.
    pub(crate) fn run_result(&self, run_id: RunId) -> Result<ResultView, Error> {
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        let status = run.summary.status;
        let last_attempt = (status == RunStatus::Finished)
            .then(|| run.step_ids.iter().max())
            .flatten()
            .and_then(|id| self.steps.get(id))
            .map(|step| LastAttempt {
                step_name: step.view.step_name.clone(),
                attempt: step.view.attempt,
                status: step.view.status,
                output: step.view.output.clone(),
            });
        let reason = matches!(status, RunStatus::Cancelled | RunStatus::Paused)
            .then(|| {
                run.events
                    .iter()
                    .rev()
                    .take(usize::try_from(REASON_EVENTS_READ).unwrap_or(usize::MAX))
                    .find(|event| event.event == status.as_str())
                    .and_then(|event| event.reason.clone())
            })
            .flatten();
        Ok(ResultView {
            run_id,
            workflow: run.summary.workflow.clone(),
            status,
            last_attempt,
            reason,
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
        })
    }
}
