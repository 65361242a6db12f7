//! Runs nobody can run: what a read says of a run whose due step no live
//! worker's registered definition has.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What keeps a run's due step from running: no live worker (a heartbeat
/// within the read's lost-worker threshold) registered its workflow, or none
/// of the live workers' definitions of the workflow holds the step. A worker
/// claims only rows whose workflow and step its own definition has, so such
/// a row waits: for a worker that registers the workflow, or, for a missing
/// step, until the sweep's grace rule pauses the run with `StepNotDefined`
/// (see `WorkerBuilder::undefined_step_grace`).
///
/// Read for a `ready` run whose current step's row is due (`scheduled` at or
/// before now, or `waiting` past its wait timeout); a run parked for a
/// signal or its batch, a step not yet due, a paused run and a running one
/// have none. Queues are not looked at: a row on a queue no worker serves
/// waits without this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Unrunnable {
    /// The row that waits (`steps.id`).
    pub step_id: i64,
    /// Its workflow.
    pub workflow: String,
    /// Its durable step name.
    pub step_name: String,
    /// What no live worker has.
    pub missing: Missing,
    /// When the row became due (its `scheduled_at`): the run has waited
    /// unrun since then. When the last worker that had it went away is not
    /// recorded, so this is the time the run could first have run, not the
    /// time it stopped being able to.
    pub since: DateTime<Utc>,
}

impl Unrunnable {
    /// A row's verdict: `step_id` of `workflow` at `step_name`, due since
    /// `since`, lacks what `missing` names.
    #[must_use]
    pub fn new(
        step_id: i64,
        workflow: impl Into<String>,
        step_name: impl Into<String>,
        missing: Missing,
        since: DateTime<Utc>,
    ) -> Self {
        Self {
            step_id,
            workflow: workflow.into(),
            step_name: step_name.into(),
            missing,
            since,
        }
    }
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.missing {
            Missing::Workflow => {
                write!(f, "no live worker registered workflow `{}`", self.workflow)
            }
            Missing::Step => write!(
                f,
                "no live worker's definition of workflow `{}` has step `{}`",
                self.workflow, self.step_name
            ),
        }
    }
}

/// What no live worker has, for a due row (see [`Unrunnable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Missing {
    /// No live worker registered the row's workflow: the row waits for one
    /// that does, without end.
    Workflow,
    /// Live workers registered the workflow, but none of their definitions
    /// of it holds the row's step (a version that removed it, or one before
    /// it was added): the row waits for a worker that has it, and the sweep
    /// pauses the run with `StepNotDefined` once it has been due for longer
    /// than the grace.
    Step,
}

impl Missing {
    /// Its stored and printed word: `workflow` or `step`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Workflow => "workflow",
            Self::Step => "step",
        }
    }

    /// The word [`Missing::as_str`] writes, read back.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "workflow" => Some(Self::Workflow),
            "step" => Some(Self::Step),
            _ => None,
        }
    }

    /// What a due row lacks, given whether some live worker registered its
    /// workflow and whether some live worker's definition of it holds its
    /// step (a gravestone counts as held): `None` when one can run it. Both
    /// stores decide with this rule (Postgres in SQL, the memory store
    /// through this function).
    #[must_use]
    pub const fn of(workflow_registered: bool, step_held: bool) -> Option<Self> {
        match (workflow_registered, step_held) {
            (false, _) => Some(Self::Workflow),
            (true, false) => Some(Self::Step),
            (true, true) => None,
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_missing_follows_the_registry() {
        assert_eq!(Missing::of(false, false), Some(Missing::Workflow));
        assert_eq!(Missing::of(true, false), Some(Missing::Step));
        assert_eq!(Missing::of(true, true), None);
        for missing in [Missing::Workflow, Missing::Step] {
            assert_eq!(Missing::parse(missing.as_str()), Some(missing));
        }
        assert_eq!(Missing::parse("queue"), None);
    }

    #[test]
    fn it_says_what_is_missing() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let workflow = Unrunnable::new(1, "orders", "ship", Missing::Workflow, at);
        assert_eq!(
            workflow.to_string(),
            "no live worker registered workflow `orders`"
        );
        let step = Unrunnable::new(1, "orders", "ship", Missing::Step, at);
        assert_eq!(
            step.to_string(),
            "no live worker's definition of workflow `orders` has step `ship`"
        );
    }
}
