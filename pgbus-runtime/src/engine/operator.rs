//! Operator actions: pause, resume, cancel and skip, decided as pure functions of
//! the run (read under its lock) and its latest step row. Both stores apply the
//! plans; neither needs the workflow's definition, since the run carries its own
//! step plan.
//!
//! The rules (their reasons are in the repository's `docs/decisions.md`,
//! "Operator actions"):
//!
//! | action | legal from | effect |
//! |---|---|---|
//! | pause | `ready`, `performing` | run `paused`; a running step still records its outcome, and its next row is scheduled but not claimed until resume (the last step still finishes the run) |
//! | resume | `paused` | an open latest row: the run goes on with it (`ready`, or `performing` while the step still runs); a failed one: a new attempt of that step, now, with its reattempt count reset; one that completed (a `Pause` verb): the next step, after its `wait`, or the run finishes |
//! | cancel | `ready`, `performing`, `paused` | run `cancelled`, every open row cancelled; a running body's completion is ignored |
//! | skip | `paused` | the step resume would run is skipped and the run advances: a scheduled row becomes `skipped`; a failed step is passed over; a step that is running or one that completed (nothing left to skip) is an illegal move |

use super::{EventKind, EventSpec, NewStep, PlannedStep, RunStatus, StepOutcome, StepStatus};

/// An operator's move on a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Stop the run after its current step; nothing new is claimed.
    Pause,
    /// Let a paused run go on.
    Resume,
    /// Stop the run for good.
    Cancel,
    /// Skip the step a paused run would run next, and go on.
    Skip,
}

impl Action {
    /// The verb, as in `pause`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Cancel => "cancel",
            Self::Skip => "skip",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an operator action is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IllegalMove {
    /// Pause of a run that is already paused.
    #[error("the run is already paused")]
    AlreadyPaused,
    /// Resume or skip of a run that is not paused.
    #[error("the run is not paused (it is {status})")]
    NotPaused {
        /// Its status.
        status: RunStatus,
    },
    /// Any action on a finished or cancelled run.
    #[error("the run has ended ({status})")]
    Ended {
        /// `finished` or `cancelled`.
        status: RunStatus,
    },
    /// Skip while the paused run's step is still running.
    #[error("step `{step}` is still running; wait for it to end, or cancel the run")]
    StepRunning {
        /// The step.
        step: String,
    },
    /// Skip after a step completed and paused the run: no step is pending.
    #[error(
        "nothing to skip: step `{step}` completed and paused the run; resume to run the next step"
    )]
    NothingToSkip {
        /// The step that paused the run.
        step: String,
    },
    /// Resume or skip needs the step after `step`, and the run's recorded step
    /// plan does not have `step` (or the run started before plans were recorded).
    #[error("the run's recorded step plan does not say which step follows `{step}`")]
    NoStepPlan {
        /// The step whose successor was asked for.
        step: String,
    },
}

/// The run's latest step row, as an operator action reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestStep {
    /// Its row id.
    pub id: i64,
    /// The durable step name.
    pub step_name: String,
    /// The attempt number.
    pub attempt: i32,
    /// Its status.
    pub status: StepStatus,
    /// Its outcome, once it ended.
    pub outcome: Option<StepOutcome>,
    /// Its queue.
    pub queue: String,
    /// Its priority.
    pub priority: i16,
    /// Its own timeout, in milliseconds.
    pub timeout_ms: Option<i64>,
}

/// What an operator action decides with: the run, read under its row lock, and its
/// latest step row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRun {
    /// The run's status.
    pub status: RunStatus,
    /// Its `current_step`.
    pub current_step: Option<String>,
    /// The step plan it recorded at start (`None` for older runs).
    pub step_plan: Option<Vec<PlannedStep>>,
    /// Its latest step row (the highest id), if any.
    pub latest: Option<LatestStep>,
}

/// The changes an operator action makes, applied in one transaction. Events about
/// a step refer to the latest row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionPlan {
    /// The run's new status.
    pub run_status: RunStatus,
    /// The run's `current_step` afterwards.
    pub current_step: Option<String>,
    /// Mark the latest row, which is scheduled or waiting, `skipped`.
    pub skip_latest: bool,
    /// Clear the run's error columns (resume, skip); otherwise they stay, so a
    /// cancelled or paused run still says what last went wrong.
    pub clear_error: bool,
    /// Cancel every open step row.
    pub cancel_open_steps: bool,
    /// A row to schedule.
    pub next: Option<NewStep>,
    /// Events, in order.
    pub events: Vec<EventSpec>,
}

/// Decides an operator action. `reason` is already storable (capped, no NUL).
///
/// # Errors
/// [`IllegalMove`] when the action is not legal from the run's state.
pub fn plan_action(
    action: Action,
    run: &ActionRun,
    reason: &str,
) -> Result<ActionPlan, IllegalMove> {
    if run.status.is_terminal() {
        return Err(IllegalMove::Ended { status: run.status });
    }
    let reason = Some(reason.to_owned());
    let mut plan = ActionPlan {
        run_status: run.status,
        current_step: run.current_step.clone(),
        skip_latest: false,
        clear_error: false,
        cancel_open_steps: false,
        next: None,
        events: Vec::new(),
    };
    match action {
        Action::Pause => {
            if run.status == RunStatus::Paused {
                return Err(IllegalMove::AlreadyPaused);
            }
            plan.run_status = RunStatus::Paused;
            plan.events.push(run_event(EventKind::Paused, reason));
        }
        Action::Cancel => {
            plan.run_status = RunStatus::Cancelled;
            plan.cancel_open_steps = true;
            plan.events.push(run_event(EventKind::Cancelled, reason));
        }
        Action::Resume => {
            require_paused(run)?;
            plan.clear_error = true;
            plan.events.push(run_event(EventKind::Resumed, reason));
            match &run.latest {
                None => plan.run_status = RunStatus::Ready,
                Some(latest) => match latest.status {
                    StepStatus::Scheduled | StepStatus::Waiting => {
                        plan.run_status = RunStatus::Ready;
                    }
                    StepStatus::InProgress => plan.run_status = RunStatus::Performing,
                    StepStatus::Failed | StepStatus::Cancelled => {
                        plan.run_status = RunStatus::Ready;
                        plan.current_step = Some(latest.step_name.clone());
                        plan.next = Some(NewStep {
                            step_name: latest.step_name.clone(),
                            attempt: latest.attempt.saturating_add(1),
                            reattempts: 0,
                            queue: latest.queue.clone(),
                            priority: latest.priority,
                            timeout_ms: latest.timeout_ms,
                            delay_ms: 0,
                        });
                    }
                    StepStatus::Completed | StepStatus::Skipped => {
                        advance(run, &latest.step_name, &mut plan)?;
                    }
                },
            }
        }
        Action::Skip => {
            require_paused(run)?;
            plan.clear_error = true;
            let Some(latest) = &run.latest else {
                return Err(IllegalMove::NothingToSkip {
                    step: run.current_step.clone().unwrap_or_default(),
                });
            };
            match latest.status {
                StepStatus::InProgress => {
                    return Err(IllegalMove::StepRunning {
                        step: latest.step_name.clone(),
                    });
                }
                StepStatus::Completed | StepStatus::Skipped => {
                    return Err(IllegalMove::NothingToSkip {
                        step: latest.step_name.clone(),
                    });
                }
                StepStatus::Scheduled | StepStatus::Waiting => plan.skip_latest = true,
                StepStatus::Failed | StepStatus::Cancelled => {}
            }
            plan.events.push(EventSpec {
                event: EventKind::StepSkipped,
                about_step: true,
                reason: reason.clone(),
                details: None,
            });
            advance(run, &latest.step_name, &mut plan)?;
            if plan.run_status != RunStatus::Finished {
                plan.events.push(run_event(EventKind::Resumed, reason));
            }
        }
    }
    Ok(plan)
}

fn require_paused(run: &ActionRun) -> Result<(), IllegalMove> {
    if run.status == RunStatus::Paused {
        Ok(())
    } else {
        Err(IllegalMove::NotPaused { status: run.status })
    }
}

/// Schedules the step after `current` in the run's plan, or finishes the run.
fn advance(run: &ActionRun, current: &str, plan: &mut ActionPlan) -> Result<(), IllegalMove> {
    let steps = run
        .step_plan
        .as_ref()
        .ok_or_else(|| IllegalMove::NoStepPlan {
            step: current.to_owned(),
        })?;
    let position = steps
        .iter()
        .position(|step| step.name == current)
        .ok_or_else(|| IllegalMove::NoStepPlan {
            step: current.to_owned(),
        })?;
    match steps.get(position + 1) {
        Some(step) => {
            plan.run_status = RunStatus::Ready;
            plan.current_step = Some(step.name.clone());
            plan.next = Some(step.first_attempt());
        }
        None => {
            plan.run_status = RunStatus::Finished;
            plan.events.push(run_event(EventKind::Finished, None));
        }
    }
    Ok(())
}

fn run_event(event: EventKind, reason: Option<String>) -> EventSpec {
    EventSpec {
        event,
        about_step: false,
        reason,
        details: None,
    }
}

#[cfg(test)]
mod tests;
