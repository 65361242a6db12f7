//! Firing schedules over any store: the due ones a worker (or the testkit)
//! can start runs of, each fenced so one tick starts one run.

use tracing::{info, warn};

use super::Store;
use crate::definition::WorkflowDefinition;
use crate::error::{Error, display_chain};
use crate::schedule::{Fired, MAX_SCHEDULES_PER_PASS, MAX_TICKS_PER_PASS};

/// The log target of the fire pass: the worker's.
const WORKER_TARGET: &str = "pgbus_runtime::worker";

/// How much one fire pass does.
#[derive(Debug, Clone, Copy)]
pub struct FireSettings {
    /// Due schedules looked at, at most.
    pub schedules: i64,
    /// Runs started per schedule, at most.
    pub ticks: usize,
}

impl Default for FireSettings {
    /// [`MAX_SCHEDULES_PER_PASS`] schedules, [`MAX_TICKS_PER_PASS`] ticks each.
    fn default() -> Self {
        Self {
            schedules: MAX_SCHEDULES_PER_PASS,
            ticks: MAX_TICKS_PER_PASS,
        }
    }
}

/// What one fire pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FireReport {
    /// Schedules whose ticks this pass handled.
    pub schedules_fired: usize,
    /// Runs started (a run a tick's key already held not counted).
    pub runs_started: usize,
    /// Missed ticks the catch-up policies ran nothing for.
    pub ticks_skipped: i64,
    /// Due schedules another worker fired first, or that changed meanwhile.
    pub lost: usize,
    /// Schedules paused because this version cannot read them.
    pub paused: usize,
}

/// Fires the due schedules of `workflows` once: each due schedule (at most
/// `settings.schedules`, oldest tick first) whose workflow `definition` knows
/// is fired through [`Store::fire_schedule`], which starts at most
/// `settings.ticks` runs of it. Leader-free: every worker may run it at once,
/// and each tick starts one run. A schedule whose fire fails for a reason
/// other than the store being away is logged and left due for the next pass,
/// so it cannot hold up the others.
///
/// # Errors
/// The store's, when it is away ([`Error::is_transient`]).
pub async fn fire_schedules<S: Store>(
    store: &S,
    workflows: &[String],
    definition: impl Fn(&str) -> Option<&'static WorkflowDefinition>,
    settings: &FireSettings,
) -> Result<FireReport, Error> {
    let mut report = FireReport::default();
    if workflows.is_empty() {
        return Ok(report);
    }
    for due in store.due_schedules(workflows, settings.schedules).await? {
        let schedule = &due.schedule;
        let Some(definition) = definition(&schedule.workflow) else {
            continue;
        };
        match store.fire_schedule(definition, &due, settings.ticks).await {
            Ok(Fired::Applied { plan, runs }) => {
                report.schedules_fired += 1;
                let started = runs.iter().filter(|(_, _, created)| *created).count();
                report.runs_started += started;
                report.ticks_skipped = report.ticks_skipped.saturating_add(plan.skipped);
                metrics::counter!(crate::metric::SCHEDULE_TICKS, "schedule" => schedule.name.clone(), "outcome" => "started")
                    .increment(started as u64);
                if plan.skipped > 0 {
                    metrics::counter!(crate::metric::SCHEDULE_TICKS, "schedule" => schedule.name.clone(), "outcome" => "skipped")
                        .increment(u64::try_from(plan.skipped).unwrap_or(0));
                }
                if plan.missed {
                    info!(
                        target: WORKER_TARGET,
                        {
                            pgbus.schedule = %schedule.name,
                            pgbus.workflow = %schedule.workflow,
                            pgbus.catch_up = %schedule.catch_up,
                            pgbus.runs_started = started,
                            pgbus.ticks_skipped = plan.skipped,
                        },
                        "schedule missed ticks; caught up by its policy"
                    );
                }
            }
            Ok(Fired::Lost) => report.lost += 1,
            Ok(Fired::Unreadable(reason)) => {
                report.paused += 1;
                warn!(
                    target: WORKER_TARGET,
                    { pgbus.schedule = %schedule.name, reason = %reason },
                    "schedule paused: this version cannot read it"
                );
            }
            Err(error) if error.is_transient() => return Err(error),
            Err(error) => warn!(
                target: WORKER_TARGET,
                { pgbus.schedule = %schedule.name, error = %display_chain(&error) },
                "schedule could not be fired; trying again on the next pass"
            ),
        }
    }
    Ok(report)
}
