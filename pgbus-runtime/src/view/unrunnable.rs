//! Runs nobody can run: what a read says of a run whose due step no live
//! worker's registered definition has, or none of those workers claims from
//! its queue.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What keeps a run's due step from running: no live worker (a heartbeat
/// within the read's lost-worker threshold) registered its workflow, none of
/// the live workers' definitions of the workflow holds the step, or none of
/// the live workers whose definition holds it claims from the row's queue.
/// A worker claims only rows whose workflow and step its own definition
/// has, on the queues it claims from, so such a row waits: for a worker that
/// registers the workflow, or claims the queue, or, for a missing step,
/// until the sweep's grace rule pauses the run with `StepNotDefined` (see
/// `WorkerBuilder::undefined_step_grace`).
///
/// Read for a `ready` run whose current step's row is due (`scheduled` at or
/// before now, or `waiting` past its wait timeout); a run parked for a
/// signal or its batch, a step not yet due, a paused run and a running one
/// have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Unrunnable {
    /// The row that waits (`steps.id`).
    pub step_id: i64,
    /// Its workflow.
    pub workflow: String,
    /// Its durable step name.
    pub step_name: String,
    /// The queue it waits on (`steps.queue`).
    pub queue: String,
    /// What no live worker has.
    pub missing: Missing,
    /// When the row became due (its `scheduled_at`): the run has waited
    /// unrun since then. When the last worker that had it went away is not
    /// recorded, so this is the time the run could first have run, not the
    /// time it stopped being able to.
    pub since: DateTime<Utc>,
}

impl Unrunnable {
    /// A row's verdict: `step_id` of `workflow` at `step_name`, on `queue`,
    /// due since `since`, lacks what `missing` names.
    #[must_use]
    pub fn new(
        step_id: i64,
        workflow: impl Into<String>,
        step_name: impl Into<String>,
        queue: impl Into<String>,
        missing: Missing,
        since: DateTime<Utc>,
    ) -> Self {
        Self {
            step_id,
            workflow: workflow.into(),
            step_name: step_name.into(),
            queue: queue.into(),
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
            Missing::Queue => write!(
                f,
                "no live worker that has step `{}` of workflow `{}` claims from queue `{}`",
                self.step_name, self.workflow, self.queue
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
    /// Live workers have the workflow and the step, but none of them claims
    /// from the row's queue (a start's queue, or a queue override, that the
    /// workers do not share): the row waits for a worker that claims it,
    /// without end.
    Queue,
}

impl Missing {
    /// Its stored and printed word: `workflow`, `step` or `queue`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Workflow => "workflow",
            Self::Step => "step",
            Self::Queue => "queue",
        }
    }

    /// The word [`Missing::as_str`] writes, read back.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "workflow" => Some(Self::Workflow),
            "step" => Some(Self::Step),
            "queue" => Some(Self::Queue),
            _ => None,
        }
    }

    /// What a due row lacks, given whether some live worker registered its
    /// workflow, whether some live worker's definition of it holds its step
    /// (a gravestone counts as held), and whether one of those workers
    /// claims from the row's queue: `None` when one can run it. Both stores
    /// decide with this rule (Postgres in SQL, the memory store through this
    /// function).
    #[must_use]
    pub const fn of(
        workflow_registered: bool,
        step_held: bool,
        queue_claimed: bool,
    ) -> Option<Self> {
        match (workflow_registered, step_held, queue_claimed) {
            (false, _, _) => Some(Self::Workflow),
            (true, false, _) => Some(Self::Step),
            (true, true, false) => Some(Self::Queue),
            (true, true, true) => None,
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
        assert_eq!(Missing::of(false, false, false), Some(Missing::Workflow));
        assert_eq!(Missing::of(false, true, true), Some(Missing::Workflow));
        assert_eq!(Missing::of(true, false, true), Some(Missing::Step));
        assert_eq!(Missing::of(true, true, false), Some(Missing::Queue));
        assert_eq!(Missing::of(true, true, true), None);
        for missing in [Missing::Workflow, Missing::Step, Missing::Queue] {
            assert_eq!(Missing::parse(missing.as_str()), Some(missing));
        }
        assert_eq!(Missing::parse("worker"), None);
    }

    #[test]
    fn it_says_what_is_missing() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let workflow = Unrunnable::new(1, "orders", "ship", "default", Missing::Workflow, at);
        assert_eq!(
            workflow.to_string(),
            "no live worker registered workflow `orders`"
        );
        let step = Unrunnable::new(1, "orders", "ship", "default", Missing::Step, at);
        assert_eq!(
            step.to_string(),
            "no live worker's definition of workflow `orders` has step `ship`"
        );
        let queue = Unrunnable::new(1, "orders", "ship", "kids", Missing::Queue, at);
        assert_eq!(
            queue.to_string(),
            "no live worker that has step `ship` of workflow `orders` claims from queue `kids`"
        );
    }
}
