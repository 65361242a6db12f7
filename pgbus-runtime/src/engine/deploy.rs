//! What a new version of a workflow will do to a run in flight: the decision
//! behind the pre-deploy check (`pgbus deploy-check`,
//! [`Client::deploy_check`](crate::Client::deploy_check), the testkit's replay
//! of a `pgbus show --json` export). It reads the run the way the engine will
//! move it once the new version has replaced every older worker of the
//! workflow:
//!
//! - A run advances along its own step list (the live steps of the version it
//!   started with, `runs.step_names`), so a step the new version added,
//!   wherever it sits, is never run by a run that started before: it *misses*
//!   it. A run from before step lists were recorded follows the definition of
//!   the worker that drives it, and misses only what was added before its
//!   position.
//! - A step of that list the new version marks removed (a `removed_step!`
//!   gravestone) is passed over, or skipped when its row is already there.
//! - A step the new version does not have at all (removed or renamed without a
//!   gravestone: a rename is a removal and an addition) is claimed by no new
//!   worker, and the sweep pauses the run with `StepNotDefined` once the row
//!   has been due for longer than the grace.
//! - A row on a queue no worker of the new version claims from waits, and so
//!   does a row parked for a signal the new version's step does not wait for
//!   (nothing will send it, and a signal check refuses it): the grace rule does
//!   not end either wait.
//!
//! An attempt in progress is taken to end as its worker decides; what follows
//! it is judged. A paused run is judged by what a resume would run.

use serde::{Deserialize, Serialize};

use super::{PlanEntry, PlannedStep, RunStatus, StepStatus};

/// A run in flight, as the check reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// Its status: `ready`, `performing` or `paused`.
    pub status: RunStatus,
    /// Its `current_step`.
    pub current_step: Option<String>,
    /// Its own step list (`runs.step_names`): the live steps of the version it
    /// started with, in order. `None` for a run from before it was recorded.
    pub step_names: Option<Vec<String>>,
    /// Where each of those steps goes (`runs.step_plan`): the queue of the
    /// step a resume schedules after a `Pause` verb.
    pub step_plan: Option<Vec<PlannedStep>>,
    /// The registry's plan of the run's definition digest, if stored: which
    /// steps a run without a step list has had (for what it missed).
    pub version_plan: Option<Vec<PlanEntry>>,
    /// The latest attempt of its current step.
    pub latest: Option<LatestRow>,
}

impl InFlight {
    /// The run's step list: `step_names`, else the names of `step_plan`.
    fn names(&self) -> Option<Vec<&str>> {
        self.step_names
            .as_ref()
            .map(|names| names.iter().map(String::as_str).collect())
            .or_else(|| {
                self.step_plan
                    .as_ref()
                    .map(|plan| plan.iter().map(|s| s.name.as_str()).collect())
            })
    }
}

/// The latest attempt of a run's current step, as the check reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestRow {
    /// The durable step name.
    pub step_name: String,
    /// Its status.
    pub status: StepStatus,
    /// The queue it is on.
    pub queue: String,
    /// The signal it is parked for, or was woken from (`None` for a fan_out
    /// waiting on its batch and for a row that never parked).
    pub waiting_for: Option<String>,
}

/// The new version of a workflow: its entries, and the queues its workers
/// claim from.
#[derive(Debug, Clone, Copy)]
pub struct NewVersion<'a> {
    /// Every entry, in declaration order, gravestones included.
    pub plan: &'a [PlanEntry],
    /// The queues the new workers claim from.
    pub queues: &'a [String],
}

impl NewVersion<'_> {
    fn entry(&self, step: &str) -> Option<&PlanEntry> {
        self.plan.iter().find(|entry| entry.name == step)
    }

    fn serves(&self, queue: &str) -> bool {
        self.queues.iter().any(|q| q == queue)
    }
}

/// What the new version does to a run, in one word; ordered from the
/// harmless to the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// It runs to its end as it would have.
    Advances,
    /// It passes over a step the new version removed with a gravestone.
    SkipsGravestone,
    /// It will never run a step the new version added.
    MissesInserted,
    /// It pauses with `StepNotDefined` (after the grace) at a step the new
    /// version lacks.
    PausesStepNotDefined,
    /// It waits, with nothing recorded, on a row nothing will take.
    Waits,
}

impl VerdictKind {
    /// Every verdict, from the harmless to the worst.
    pub const ALL: [Self; 5] = [
        Self::Advances,
        Self::SkipsGravestone,
        Self::MissesInserted,
        Self::PausesStepNotDefined,
        Self::Waits,
    ];

    /// Its word: `advances`, `skips_gravestone`, `misses_inserted`,
    /// `pauses_step_not_defined` or `waits`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Advances => "advances",
            Self::SkipsGravestone => "skips_gravestone",
            Self::MissesInserted => "misses_inserted",
            Self::PausesStepNotDefined => "pauses_step_not_defined",
            Self::Waits => "waits",
        }
    }

    /// Whether a run with this verdict stops: it pauses or waits.
    #[must_use]
    pub const fn stops(self) -> bool {
        matches!(self, Self::PausesStepNotDefined | Self::Waits)
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where and why a run stops under the new version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Stop {
    /// The new version does not have `step` (no gravestone either): the run
    /// pauses with `StepNotDefined` there once its row has been due for
    /// longer than the grace.
    NotDefined {
        /// The step.
        step: String,
    },
    /// `step`'s row is (or will be) on `queue`, which no worker of the new
    /// version claims from.
    QueueNotServed {
        /// The step.
        step: String,
        /// The queue.
        queue: String,
    },
    /// `step`'s row is parked for (or was woken by) `signal`, which the new
    /// version's `step` does not wait for.
    SignalNotAwaited {
        /// The step.
        step: String,
        /// The signal.
        signal: String,
    },
}

impl Stop {
    /// The step the run stops at.
    #[must_use]
    pub fn step(&self) -> &str {
        match self {
            Self::NotDefined { step }
            | Self::QueueNotServed { step, .. }
            | Self::SignalNotAwaited { step, .. } => step,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotDefined { step } => write!(
                f,
                "pauses with StepNotDefined at `{step}`: the new version has no such step (a renamed method keeps it with `#[step(name = \"{step}\")]`; `removed_step!({step})` skips it)"
            ),
            Self::QueueNotServed { step, queue } => write!(
                f,
                "waits at `{step}`: its row is on queue `{queue}`, which no new worker claims from"
            ),
            Self::SignalNotAwaited { step, signal } => write!(
                f,
                "waits at `{step}`: it is parked for signal `{signal}`, which the new version's `{step}` does not wait for"
            ),
        }
    }
}

/// What the new version does to one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// In one word: the stop's, else `misses_inserted` when it misses a step,
    /// else `skips_gravestone` when it skips one, else `advances`.
    pub verdict: VerdictKind,
    /// Where and why it pauses or waits, if it does.
    pub stop: Option<Stop>,
    /// Steps of its list it passes over, as the new version marks them
    /// removed (up to where it stops).
    pub skipped: Vec<String>,
    /// Steps the new version added that it will never run.
    pub missed: Vec<String>,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |names: &[String]| {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if let Some(stop) = &self.stop {
            parts.push(stop.to_string());
        }
        if !self.missed.is_empty() {
            parts.push(format!("never runs {}", list(&self.missed)));
        }
        if !self.skipped.is_empty() {
            parts.push(format!("skips {}", list(&self.skipped)));
        }
        if parts.is_empty() {
            parts.push("advances".to_owned());
        }
        f.write_str(&parts.join("; "))
    }
}

/// What a run does next, before the new version decides anything.
enum Next<'a> {
    /// A row of `step` a worker must claim: one that is there, or the one a
    /// resume writes. `queue`: where it is (`None`: not known).
    Row {
        step: &'a str,
        queue: Option<&'a str>,
        signal: Option<&'a str>,
        parked: bool,
    },
    /// `step` ended or is running; the steps after it follow.
    After(&'a str),
    /// Nothing is known of its rows: it starts from its first step.
    Start,
}

/// Decides what `new` does to `run` (see the module docs for the rules).
#[must_use]
pub fn deploy_verdict(run: &InFlight, new: &NewVersion<'_>) -> Verdict {
    let names = run.names();
    let mut walk = Walk {
        new,
        skipped: Vec::new(),
        stop: None,
    };
    let next = next_move(run, names.as_deref());
    // The steps after the row (or the ended step), in the order the run takes
    // them: its own list, else the new version's order.
    let after = match &next {
        Next::Row { step, .. } | Next::After(step) => Some(*step),
        Next::Start => None,
    };
    if let Next::Row {
        step,
        queue,
        signal,
        parked,
    } = next
    {
        walk.row(step, queue, signal, parked);
    }
    let missed = missed(run, names.as_deref(), new, after);
    if walk.stop.is_none() {
        match names.as_deref() {
            Some(names) => {
                // A step outside its own list (never written so) leaves
                // nothing to judge after it.
                let from = after.map_or(0, |step| {
                    names
                        .iter()
                        .position(|n| *n == step)
                        .map_or(names.len(), |i| i + 1)
                });
                for name in &names[from..] {
                    if !walk.following(name) {
                        break;
                    }
                }
            }
            None => walk.legacy_following(run, after),
        }
    }
    let verdict = match &walk.stop {
        Some(Stop::NotDefined { .. }) => VerdictKind::PausesStepNotDefined,
        Some(_) => VerdictKind::Waits,
        None if !missed.is_empty() => VerdictKind::MissesInserted,
        None if !walk.skipped.is_empty() => VerdictKind::SkipsGravestone,
        None => VerdictKind::Advances,
    };
    Verdict {
        verdict,
        stop: walk.stop,
        skipped: walk.skipped,
        missed,
    }
}

/// What the run does next, from its latest row: a row to claim (scheduled or
/// parked, or the one a resume writes for a failed step or after a `Pause`
/// verb), or the steps after one that runs.
fn next_move<'a>(run: &'a InFlight, names: Option<&[&'a str]>) -> Next<'a> {
    let Some(latest) = &run.latest else {
        return run
            .current_step
            .as_deref()
            .map_or(Next::Start, |step| Next::Row {
                step,
                queue: None,
                signal: None,
                parked: false,
            });
    };
    let step = latest.step_name.as_str();
    match latest.status {
        StepStatus::Scheduled | StepStatus::Waiting => Next::Row {
            step,
            queue: Some(&latest.queue),
            signal: latest.waiting_for.as_deref(),
            parked: latest.status == StepStatus::Waiting,
        },
        // A resume runs the step again, as a new attempt on the same queue.
        StepStatus::Failed | StepStatus::Cancelled => Next::Row {
            step,
            queue: Some(&latest.queue),
            signal: None,
            parked: false,
        },
        StepStatus::InProgress => Next::After(step),
        // Ended with a `Pause` verb: a resume schedules the next step of the
        // run's list where its plan places it (no definition decides).
        StepStatus::Completed | StepStatus::Skipped => {
            let next = names.and_then(|names| {
                let i = names.iter().position(|n| *n == step)?;
                names.get(i + 1).copied()
            });
            match next {
                Some(next) if run.status == RunStatus::Paused => Next::Row {
                    step: next,
                    queue: run
                        .step_plan
                        .as_ref()
                        .and_then(|plan| plan.iter().find(|s| s.name == next))
                        .map(|s| s.queue.as_str()),
                    signal: None,
                    parked: false,
                },
                _ => Next::After(step),
            }
        }
    }
}

/// The live steps of the new version that the run will never run: those its
/// list lacks, or, for a run without a list, those before its position that
/// the version it runs lacked (unknown without the registry's plan of it).
fn missed(
    run: &InFlight,
    names: Option<&[&str]>,
    new: &NewVersion<'_>,
    position: Option<&str>,
) -> Vec<String> {
    let live = new.plan.iter().filter(|entry| !entry.is_removed());
    match names {
        Some(names) => live
            .filter(|entry| !names.contains(&entry.name.as_str()))
            .map(|entry| entry.name.clone())
            .collect(),
        None => {
            let (Some(had), Some(position)) = (&run.version_plan, position) else {
                return Vec::new();
            };
            live.take_while(|entry| entry.name != position)
                .filter(|entry| !had.iter().any(|h| h.name == entry.name))
                .map(|entry| entry.name.clone())
                .collect()
        }
    }
}

/// The run's way forward under the new version, step by step.
struct Walk<'n, 'a> {
    new: &'n NewVersion<'a>,
    skipped: Vec<String>,
    stop: Option<Stop>,
}

impl Walk<'_, '_> {
    /// A row a worker must claim. A row parked for a signal the new step does
    /// not wait for waits; one woken by such a signal parks again for the new
    /// signal, so it waits too (a body without a gate just runs). Then a step
    /// the new version lacks pauses, whatever its queue (the grace rule does
    /// not look at queues); a gravestone's row is skipped and any other runs,
    /// once a new worker claims from its queue.
    fn row(&mut self, step: &str, queue: Option<&str>, signal: Option<&str>, parked: bool) {
        let entry = self.new.entry(step);
        if let Some(signal) = signal {
            let awaits = entry.and_then(|e| e.wait_for.as_deref());
            if awaits != Some(signal) && (parked || awaits.is_some()) {
                self.stop = Some(Stop::SignalNotAwaited {
                    step: step.to_owned(),
                    signal: signal.to_owned(),
                });
                return;
            }
        }
        let Some(entry) = entry else {
            self.stop = Some(Stop::NotDefined {
                step: step.to_owned(),
            });
            return;
        };
        if let Some(queue) = queue.filter(|q| !self.new.serves(q)) {
            self.stop = Some(Stop::QueueNotServed {
                step: step.to_owned(),
                queue: queue.to_owned(),
            });
            return;
        }
        if entry.is_removed() {
            self.skipped.push(step.to_owned());
        }
    }

    /// A step a new worker schedules as the run advances: passed over when
    /// the new version marks it removed; scheduled anyway (and paused) when
    /// it lacks it; else placed on the new version's queue for it. False
    /// once the run stops.
    fn following(&mut self, step: &str) -> bool {
        match self.new.entry(step) {
            None => {
                self.stop = Some(Stop::NotDefined {
                    step: step.to_owned(),
                });
                false
            }
            Some(entry) if entry.is_removed() => {
                self.skipped.push(step.to_owned());
                true
            }
            Some(entry) if !self.new.serves(&entry.queue) => {
                self.stop = Some(Stop::QueueNotServed {
                    step: step.to_owned(),
                    queue: entry.queue.clone(),
                });
                false
            }
            Some(_) => true,
        }
    }

    /// For a run without a step list: it follows the new version's live
    /// entries after its position (all of them from the start), and a
    /// position the new version lacks has already stopped it.
    fn legacy_following(&mut self, run: &InFlight, after: Option<&str>) {
        let from = match after {
            Some(step) => match self.new.plan.iter().position(|e| e.name == step) {
                Some(i) => i + 1,
                // A running step the new version lacks: its own (older)
                // worker decides what follows, by a definition the check
                // does not have; nothing more is judged.
                None => return,
            },
            None => 0,
        };
        for entry in &self.new.plan[from..] {
            if entry.is_removed() {
                // Skipped only if the run's version had it as a step.
                let had = run.version_plan.as_ref().is_some_and(|plan| {
                    plan.iter().any(|h| h.name == entry.name && !h.is_removed())
                });
                if had {
                    self.skipped.push(entry.name.clone());
                }
                continue;
            }
            if !self.following(&entry.name) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
