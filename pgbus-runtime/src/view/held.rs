//! What a run's due step waits for when a flow limit holds it back: a
//! concurrency slot or a rate window, and which key.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::engine::StepStatus;

use super::RunView;

/// A due step a flow limit holds back (see the runtime guide's "Flow
/// control"): read from the run's latest `scheduled` row's `held_by` or
/// `throttled_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeldBack {
    /// The row waits for a slot of a concurrency limit: it is out of the
    /// claim's way until a slot of `key` is given back.
    Concurrency {
        /// The row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// The limit key: `workflow:<workflow>`, `key:<workflow>:<key>` or
        /// `queue:<queue>`.
        key: String,
    },
    /// The row waits for a rate window: due at `until`, when the window of
    /// `key` lets it start.
    Rate {
        /// The row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// The rate key: `workflow:<workflow>`, `step:<workflow>/<step>` or
        /// `key:<workflow>:<key>`.
        key: String,
        /// When the window lets it start (the row's `scheduled_at`).
        until: DateTime<Utc>,
    },
}

impl HeldBack {
    /// The limit or rate key holding the row back.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            Self::Concurrency { key, .. } | Self::Rate { key, .. } => key,
        }
    }
}

impl fmt::Display for HeldBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Concurrency { step_name, key, .. } => write!(
                f,
                "step `{step_name}` waits for a concurrency slot of `{key}` (every slot is held)"
            ),
            Self::Rate {
                step_name,
                key,
                until,
                ..
            } => write!(
                f,
                "step `{step_name}` waits for the rate window of `{key}`: it may start at {}",
                until.format("%Y-%m-%d %H:%M:%S%.3f UTC")
            ),
        }
    }
}

impl RunView {
    /// What holds the run's due step back, if a flow limit does: the latest
    /// `scheduled` row read with a `held_by` (a concurrency slot) or a
    /// `throttled_by` (a rate window). `None` for a run whose rows are not
    /// held (and for one whose held row is beyond the read's last rows).
    #[must_use]
    pub fn held_back(&self) -> Option<HeldBack> {
        let step = self
            .steps
            .iter()
            .rev()
            .find(|s| s.status == StepStatus::Scheduled)?;
        if let Some(key) = &step.held_by {
            return Some(HeldBack::Concurrency {
                step_id: step.id,
                step_name: step.step_name.clone(),
                key: key.clone(),
            });
        }
        step.throttled_by.as_ref().map(|key| HeldBack::Rate {
            step_id: step.id,
            step_name: step.step_name.clone(),
            key: key.clone(),
            until: step.scheduled_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RunStatus;
    use crate::timeline::tests::{at, row, run};

    #[test]
    fn the_latest_scheduled_row_says_what_holds_it() {
        let mut view = run(RunStatus::Ready, Vec::new(), 0);
        assert_eq!(view.held_back(), None, "no rows");

        let mut done = row(1, 0);
        done.status = StepStatus::Completed;
        done.held_by = Some("workflow:w".into());
        view.steps.push(done);
        assert_eq!(view.held_back(), None, "an ended row holds nothing back");

        let mut held = row(2, 5);
        held.held_by = Some("key:w:customer-7".into());
        view.steps.push(held);
        let back = view.held_back().expect("held");
        assert_eq!(back.key(), "key:w:customer-7");
        assert_eq!(
            back.to_string(),
            "step `s` waits for a concurrency slot of `key:w:customer-7` (every slot is held)"
        );

        view.steps[1].held_by = None;
        view.steps[1].throttled_by = Some("step:w/s".into());
        assert_eq!(
            view.held_back(),
            Some(HeldBack::Rate {
                step_id: 2,
                step_name: "s".into(),
                key: "step:w/s".into(),
                until: at(5),
            })
        );

        view.steps[1].throttled_by = None;
        assert_eq!(view.held_back(), None, "a due row no limit holds");
    }
}
