//! Delivering a signal to a run.

use std::collections::BTreeSet;

use pgbus_runtime::EntryKind;
use pgbus_runtime::engine::{SignalCheck, StepStatus, check_signal_target};
use pgbus_runtime::{Error, EventKind, RunId, SignalId, SignalView};
use serde_json::Value;

use super::Rows;

impl Rows {
    /// As `Client::signal` (the name and payload already checked): records a
    /// signal for a run that has not ended with its `signal_received` event, and
    /// wakes the run's steps waiting for `name`. With [`SignalCheck::Waited`],
    /// only a name some definition of the run's workflow waits for, as
    /// `lock_signalled_run.sql` reads them.
    pub(crate) fn signal(
        &mut self,
        run_id: RunId,
        name: &str,
        payload: Value,
        check: SignalCheck,
    ) -> Result<pgbus_runtime::SignalId, Error> {
        let now = self.now;
        let run = self
            .runs
            .get(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
        if run.summary.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id,
                status: run.summary.status,
            });
        }
        if check == SignalCheck::Waited {
            let waited = self.waited_for(run_id);
            check_signal_target(run_id, &run.summary.workflow, name, Some(&waited))?;
        }
        let run = self
            .runs
            .get_mut(&run_id.0)
            .ok_or(Error::RunNotFound { run_id })?;
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

    /// The names the run's workflow waits for (`wait_for`): in the run's
    /// own step plan, in every definition of the workflow registered, and
    /// as its parked steps (`lock_signalled_run.sql`). A memory run always
    /// has its step plan, so there is always something to judge by.
    fn waited_for(&self, run_id: RunId) -> BTreeSet<String> {
        let Some(run) = self.runs.get(&run_id.0) else {
            return BTreeSet::new();
        };
        let planned = run
            .step_plan
            .iter()
            .filter_map(|step| step.wait_for.clone());
        let registered = self
            .definitions
            .values()
            .filter(|definition| definition.name == run.summary.workflow)
            .flat_map(|definition| definition.entries.iter())
            .filter(|entry| entry.kind != EntryKind::Removed)
            .filter_map(|entry| entry.options.wait_for.as_ref())
            .map(|wait| wait.signal.to_owned());
        let parked = run
            .step_ids
            .iter()
            .filter_map(|id| self.steps.get(id))
            .filter(|step| step.view.status == StepStatus::Waiting)
            .filter_map(|step| step.view.waiting_for.clone());
        planned.chain(registered).chain(parked).collect()
    }
}
