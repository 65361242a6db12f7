//! Delivering a signal to a run.

use pgbus_runtime::engine::StepStatus;
use pgbus_runtime::{Error, EventKind, RunId, SignalId, SignalView};
use serde_json::Value;

use super::Rows;

impl Rows {
    /// As `Client::signal` (the name and payload already checked): records a
    /// signal for a run that has not ended with its `signal_received` event, and
    /// wakes the run's steps waiting for `name`.
    pub(crate) fn signal(
        &mut self,
        run_id: RunId,
        name: &str,
        payload: Value,
    ) -> Result<pgbus_runtime::SignalId, Error> {
        let now = self.now;
        let run = self
            .runs
            .get_mut(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        if run.summary.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id,
                status: run.summary.status,
            });
        }
        let id = self.next_signal;
        self.next_signal += 1;
        run.signals.push(SignalView {
            id: SignalId(id),
            name: name.to_owned(),
            payload,
            created_at: now,
            consumed_by: None,
            consumed_at: None,
        });
        self.event(
            run_id,
            None,
            EventKind::SignalReceived,
            "client",
            Some(name.to_owned()),
        );
        self.set_details(Some(serde_json::json!({ "signal_id": id })));
        for step_id in self.step_ids(run_id) {
            let waiting = self.steps.get(&step_id).is_some_and(|step| {
                step.view.status == StepStatus::Waiting
                    && step.view.waiting_for.as_deref() == Some(name)
            });
            if waiting {
                self.update_step(step_id, |step| {
                    step.view.status = StepStatus::Scheduled;
                    step.view.scheduled_at = now;
                });
            }
        }
        Ok(pgbus_runtime::SignalId(id))
    }
}
