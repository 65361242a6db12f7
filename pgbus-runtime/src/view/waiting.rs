//! What a run waits for, in one answer: a signal, its fan-out batch, a
//! time (a step's `wait`, a start's delay, a reattempt's backoff), a worker
//! that can run its step, or a flow limit.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::engine::{RunStatus, StepStatus};

use super::{HeldBack, RunView, Unrunnable};

/// What a `ready` run waits for before its next step can run (see
/// [`RunView::waiting_for`]). A run that is running, paused or ended waits
/// for none of these, and neither does one whose step is due and claimable:
/// a worker takes it at its next claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "for", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WaitingFor {
    /// A step parked for a signal (`wait_for`).
    Signal {
        /// The waiting row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// The signal's name.
        name: String,
        /// When the row first parked.
        since: DateTime<Utc>,
        /// When its `wait_timeout` runs out (the row's due time); `None`
        /// for a wait without one.
        timeout_at: Option<DateTime<Utc>>,
    },
    /// A fan_out step parked for its batch of child runs.
    Batch {
        /// The waiting row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// The batch (`batches.id`); `None` when the read did not keep it
        /// (a run with more batches than [`RunRead::last`](crate::RunRead::last)).
        batch_id: Option<i64>,
        /// Children of the batch that finished.
        finished: i32,
        /// Children of the batch that were cancelled.
        cancelled: i32,
        /// Children in the batch.
        total: i32,
        /// When the row first parked.
        since: Option<DateTime<Utc>>,
    },
    /// A step not due yet: the step's `wait` after the previous one, or
    /// the start's delay.
    Time {
        /// The row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// When it is due.
        until: DateTime<Utc>,
    },
    /// A reattempt not due yet: the backoff (`wait`) of the policy that
    /// reattempted the step.
    Backoff {
        /// The row (`steps.id`).
        step_id: i64,
        /// Its durable step name.
        step_name: String,
        /// The attempt that waits (2 or more).
        attempt: i32,
        /// When it is due.
        until: DateTime<Utc>,
    },
    /// A live worker that can run the due step: none has it (see
    /// [`RunView::unrunnable`]).
    Worker(Unrunnable),
    /// A flow limit holding the due step back (see [`RunView::held_back`]).
    Limit(HeldBack),
}

/// How far past its park a wait's due time must be to be a `wait_timeout`:
/// a wait without one is due [`MAX_DURATION_MS`](crate::MAX_DURATION_MS)
/// after it last parked, never sooner after it first parked.
fn timeout_at(since: DateTime<Utc>, due: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let forever = i64::try_from(crate::MAX_DURATION_MS).unwrap_or(i64::MAX);
    ((due - since).num_milliseconds() < forever).then_some(due)
}

impl RunView {
    /// What the run waits for at `now` (the store's time, as the read's),
    /// from the latest `scheduled` or `waiting` row the read kept: a worker
    /// that can run it ([`RunView::unrunnable`]) first, then a flow limit
    /// ([`RunView::held_back`]), then the signal or batch a parked row
    /// waits for, then the time a row not yet due waits until (a reattempt's
    /// backoff for attempts after the first). `None` for a run that is not
    /// `ready`, and for one whose step is due and a worker can claim.
    #[must_use]
    pub fn waiting_for(&self, now: DateTime<Utc>) -> Option<WaitingFor> {
        if self.run.status != RunStatus::Ready {
            return None;
        }
        if let Some(unrunnable) = &self.unrunnable {
            return Some(WaitingFor::Worker(unrunnable.clone()));
        }
        if let Some(held) = self.held_back() {
            return Some(WaitingFor::Limit(held));
        }
        let step = self
            .steps
            .iter()
            .rev()
            .find(|s| matches!(s.status, StepStatus::Scheduled | StepStatus::Waiting))?;
        let (step_id, step_name) = (step.id, step.step_name.clone());
        if step.status == StepStatus::Waiting {
            if let Some(name) = &step.waiting_for {
                let since = step.waiting_since.unwrap_or(step.created_at);
                return Some(WaitingFor::Signal {
                    step_id,
                    step_name,
                    name: name.clone(),
                    since,
                    timeout_at: timeout_at(since, step.scheduled_at),
                });
            }
            let batch = self
                .batches
                .iter()
                .rev()
                .find(|b| b.parent_step_id == step_id);
            return Some(WaitingFor::Batch {
                step_id,
                step_name,
                batch_id: batch.map(|b| b.id),
                finished: batch.map_or(0, |b| b.finished),
                cancelled: batch.map_or(0, |b| b.cancelled),
                total: batch.map_or(0, |b| b.total),
                since: step.waiting_since,
            });
        }
        if step.scheduled_at <= now {
            return None;
        }
        Some(if step.attempt > 1 {
            WaitingFor::Backoff {
                step_id,
                step_name,
                attempt: step.attempt,
                until: step.scheduled_at,
            }
        } else {
            WaitingFor::Time {
                step_id,
                step_name,
                until: step.scheduled_at,
            }
        })
    }
}

impl fmt::Display for WaitingFor {
    /// One sentence, times absolute (UTC): what a page or a terminal says.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string();
        match self {
            Self::Signal {
                step_name,
                name,
                since,
                timeout_at,
                ..
            } => {
                write!(
                    f,
                    "step `{step_name}` waits for signal `{name}`, since {}",
                    at(since)
                )?;
                match timeout_at {
                    Some(until) => write!(f, "; its wait times out at {}", at(until)),
                    None => f.write_str("; no timeout"),
                }
            }
            Self::Batch {
                step_name,
                batch_id,
                finished,
                cancelled,
                total,
                ..
            } => match batch_id {
                Some(batch) => {
                    write!(
                        f,
                        "step `{step_name}` waits for its batch {batch}: {finished} of {total} \
                         children finished"
                    )?;
                    if *cancelled > 0 {
                        write!(f, ", {cancelled} cancelled")?;
                    }
                    Ok(())
                }
                None => write!(f, "step `{step_name}` waits for its batch of children"),
            },
            Self::Time {
                step_name, until, ..
            } => write!(f, "step `{step_name}` is due at {}", at(until)),
            Self::Backoff {
                step_name,
                attempt,
                until,
                ..
            } => write!(
                f,
                "attempt {attempt} of step `{step_name}` waits out its backoff until {}",
                at(until)
            ),
            Self::Worker(unrunnable) => unrunnable.fmt(f),
            Self::Limit(held) => held.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests;
