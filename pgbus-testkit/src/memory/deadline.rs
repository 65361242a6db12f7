//! Run deadlines: the sweep's pass over the runs past theirs, as the
//! Postgres store's `expire_deadlines`.

use chrono::{DateTime, Utc};
use pgbus_runtime::engine::{Action, DEADLINE_ACTOR, DeadlineState, past_deadline, plan_deadline};
use pgbus_runtime::{DeadlineAction, Error, RunId};

use super::Rows;

impl Rows {
    /// As `expiring_runs.sql` and then one transaction per run: up to
    /// `limit` runs past their deadline that have not ended, oldest deadline
    /// first, each decided by the engine and applied as an operator action
    /// of [`DEADLINE_ACTOR`], its deadline then spent.
    pub(crate) fn expire_deadlines(
        &mut self,
        limit: i64,
    ) -> Result<Vec<(RunId, DeadlineAction)>, Error> {
        let now = self.now;
        let mut due: Vec<(DateTime<Utc>, i64)> = self
            .runs
            .values()
            .filter(|run| !run.summary.status.is_terminal())
            .filter_map(|run| {
                run.deadline_at
                    .filter(|at| *at <= now)
                    .map(|at| (at, run.summary.id.0))
            })
            .collect();
        due.sort_unstable();
        due.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let mut expired = Vec::with_capacity(due.len());
        for (_, id) in due {
            let run_id = RunId(id);
            if let Some(action) = self.expire(run_id)? {
                expired.push((run_id, action));
            }
        }
        Ok(expired)
    }

    /// One run's deadline, as `expire_in` on Postgres.
    fn expire(&mut self, run_id: RunId) -> Result<Option<DeadlineAction>, Error> {
        let now = self.now;
        let Some(run) = self.runs.get(&run_id.0) else {
            return Ok(None);
        };
        let deadline = DeadlineState {
            deadline_at: run.deadline_at,
            on_deadline: run.on_deadline,
        };
        if !past_deadline(deadline.deadline_at, now) {
            return Ok(None);
        }
        let (state, latest) = self.action_run(run_id)?;
        let action = match deadline.on_deadline {
            DeadlineAction::Cancel => Action::Cancel,
            DeadlineAction::Pause => Action::Pause,
        };
        let plan = plan_deadline(&state, &deadline, now).map_err(|why| Error::IllegalMove {
            run_id,
            action,
            why,
        })?;
        let Some(plan) = plan else {
            return Ok(None);
        };
        self.apply_action(run_id, latest.as_ref(), &plan, DEADLINE_ACTOR);
        if let Some(run) = self.runs.get_mut(&run_id.0) {
            run.deadline_at = None;
        }
        Ok(Some(deadline.on_deadline))
    }

    /// The earliest deadline after now of a run that has not ended: when a
    /// `TestEnv` moving its clock next has a deadline to act on.
    pub(crate) fn next_deadline(&self) -> Option<DateTime<Utc>> {
        self.runs
            .values()
            .filter(|run| !run.summary.status.is_terminal())
            .filter_map(|run| run.deadline_at)
            .filter(|at| *at > self.now)
            .min()
    }

    /// Whether run `run_id` is past its deadline: no step of it starts (as
    /// claim.sql and a handoff check it).
    pub(super) fn past_deadline(&self, run_id: RunId) -> bool {
        self.runs
            .get(&run_id.0)
            .is_some_and(|run| past_deadline(run.deadline_at, self.now))
    }
}
