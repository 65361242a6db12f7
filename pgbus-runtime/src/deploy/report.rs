//! What a definitions document would do to the runs in flight, counted per
//! workflow and digest.

use serde::Serialize;

use super::Definitions;
use crate::engine::{
    InFlight, NewVersion, RunStatus, StepStatus, Verdict, VerdictKind, deploy_verdict,
};

/// The most distinct positions (workflow, digest, step list, status, current
/// step and its latest row) the check reads; past it the report is
/// [`DeployReport::truncated`].
pub const MAX_DEPLOY_POSITIONS: usize = 10_000;

/// Runs in flight that share a workflow, a definition digest and a position:
/// one row of the check's grouped read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The workflow.
    pub workflow: String,
    /// The runs' `definition_digest` (the version that last drove them).
    pub digest: String,
    /// How many runs.
    pub runs: i64,
    /// Where they are.
    pub run: InFlight,
}

/// How many runs a definition of a workflow is registered for by live
/// workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveDefinition {
    /// The workflow.
    pub workflow: String,
    /// The digest of the definition.
    pub digest: String,
    /// How many live workers registered it.
    pub workers: i64,
}

/// Runs per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    /// Runs that advance as they would have.
    pub advances: i64,
    /// Runs that skip a gravestone.
    pub skips_gravestone: i64,
    /// Runs that will never run a step the new version added.
    pub misses_inserted: i64,
    /// Runs that pause with `StepNotDefined`.
    pub pauses_step_not_defined: i64,
    /// Runs that wait on a row nothing will take.
    pub waits: i64,
}

impl VerdictCounts {
    /// The count of `kind`.
    #[must_use]
    pub const fn get(&self, kind: VerdictKind) -> i64 {
        match kind {
            VerdictKind::Advances => self.advances,
            VerdictKind::SkipsGravestone => self.skips_gravestone,
            VerdictKind::MissesInserted => self.misses_inserted,
            VerdictKind::PausesStepNotDefined => self.pauses_step_not_defined,
            VerdictKind::Waits => self.waits,
        }
    }

    fn add(&mut self, kind: VerdictKind, runs: i64) {
        let count = match kind {
            VerdictKind::Advances => &mut self.advances,
            VerdictKind::SkipsGravestone => &mut self.skips_gravestone,
            VerdictKind::MissesInserted => &mut self.misses_inserted,
            VerdictKind::PausesStepNotDefined => &mut self.pauses_step_not_defined,
            VerdictKind::Waits => &mut self.waits,
        };
        *count = count.saturating_add(runs);
    }

    fn merge(&mut self, other: &Self) {
        for kind in VerdictKind::ALL {
            self.add(kind, other.get(kind));
        }
    }

    /// Runs that pause or wait.
    #[must_use]
    pub const fn stopped(&self) -> i64 {
        self.pauses_step_not_defined.saturating_add(self.waits)
    }

    /// All runs counted.
    #[must_use]
    pub fn total(&self) -> i64 {
        VerdictKind::ALL
            .iter()
            .fold(0_i64, |sum, kind| sum.saturating_add(self.get(*kind)))
    }
}

/// One position of a digest's runs, with its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PositionCheck {
    /// The runs' status.
    pub run_status: RunStatus,
    /// Their current step.
    pub step: Option<String>,
    /// The status of its latest attempt.
    pub step_status: Option<StepStatus>,
    /// How many runs.
    pub runs: i64,
    /// What the new version does to them.
    pub verdict: Verdict,
}

/// A workflow's runs of one digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DigestCheck {
    /// The runs' `definition_digest`.
    pub digest: String,
    /// Runs per verdict.
    pub counts: VerdictCounts,
    /// Their positions, worst verdict first.
    pub positions: Vec<PositionCheck>,
}

/// One workflow of the document, against its runs in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowCheck {
    /// The workflow.
    pub workflow: String,
    /// The digest of the document's definition of it.
    pub new_digest: String,
    /// The definitions of it live workers registered now.
    pub live: Vec<LiveDefinition>,
    /// Its runs in flight, per digest (sorted).
    pub digests: Vec<DigestCheck>,
    /// Runs per verdict over all its digests.
    pub counts: VerdictCounts,
}

/// What a definitions document would do to the runs in flight, once its
/// workers have replaced every live worker of its workflows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeployReport {
    /// The queues the new workers claim from.
    pub queues: Vec<String>,
    /// Each workflow of the document, sorted by name.
    pub workflows: Vec<WorkflowCheck>,
    /// Workflows live workers registered that the document does not define:
    /// not checked (their workers may be another deployment's).
    pub unchecked: Vec<String>,
    /// Runs per verdict over all workflows.
    pub counts: VerdictCounts,
    /// Whether more than [`MAX_DEPLOY_POSITIONS`] positions were in flight:
    /// the counts are then not complete.
    pub truncated: bool,
}

impl DeployReport {
    /// Judges each position of `positions` (runs of a workflow `new` does
    /// not define are left out) and counts the verdicts per workflow and
    /// digest; `live` is what live workers registered now.
    #[must_use]
    pub fn build(
        new: &Definitions,
        positions: &[Position],
        live: &[LiveDefinition],
        truncated: bool,
    ) -> Self {
        let mut report = Self {
            queues: new.queues.clone(),
            workflows: Vec::new(),
            unchecked: Vec::new(),
            counts: VerdictCounts::default(),
            truncated,
        };
        for definition in &new.definitions {
            let version = NewVersion {
                plan: &definition.step_plan,
                queues: &new.queues,
            };
            let mut check = WorkflowCheck {
                workflow: definition.workflow.clone(),
                new_digest: definition.digest.clone(),
                live: live
                    .iter()
                    .filter(|l| l.workflow == definition.workflow)
                    .cloned()
                    .collect(),
                digests: Vec::new(),
                counts: VerdictCounts::default(),
            };
            for position in positions
                .iter()
                .filter(|p| p.workflow == definition.workflow)
            {
                let verdict = deploy_verdict(&position.run, &version);
                check.add(position, verdict);
            }
            check.digests.sort_by(|a, b| a.digest.cmp(&b.digest));
            for digest in &mut check.digests {
                digest.positions.sort_by(|a, b| {
                    b.verdict
                        .verdict
                        .cmp(&a.verdict.verdict)
                        .then_with(|| a.step.cmp(&b.step))
                });
            }
            report.counts.merge(&check.counts);
            report.workflows.push(check);
        }
        let mut unchecked: Vec<String> = live
            .iter()
            .filter(|l| new.definition(&l.workflow).is_none())
            .map(|l| l.workflow.clone())
            .collect();
        unchecked.sort();
        unchecked.dedup();
        report.unchecked = unchecked;
        report
    }

    /// Whether some run would pause or wait.
    #[must_use]
    pub const fn stops_runs(&self) -> bool {
        self.counts.stopped() > 0
    }
}

impl WorkflowCheck {
    /// Counts `position`'s runs under its digest, merged with the positions
    /// that read the same (the same status, step, row status and verdict).
    fn add(&mut self, position: &Position, verdict: Verdict) {
        let digest = match self
            .digests
            .iter_mut()
            .position(|d| d.digest == position.digest)
        {
            Some(i) => &mut self.digests[i],
            None => {
                self.digests.push(DigestCheck {
                    digest: position.digest.clone(),
                    counts: VerdictCounts::default(),
                    positions: Vec::new(),
                });
                let last = self.digests.len() - 1;
                &mut self.digests[last]
            }
        };
        digest.counts.add(verdict.verdict, position.runs);
        self.counts.add(verdict.verdict, position.runs);
        let run = &position.run;
        let step_status = run.latest.as_ref().map(|l| l.status);
        let step = run
            .latest
            .as_ref()
            .map(|l| l.step_name.clone())
            .or_else(|| run.current_step.clone());
        if let Some(same) = digest.positions.iter_mut().find(|p| {
            p.run_status == run.status
                && p.step == step
                && p.step_status == step_status
                && p.verdict == verdict
        }) {
            same.runs = same.runs.saturating_add(position.runs);
        } else {
            digest.positions.push(PositionCheck {
                run_status: run.status,
                step,
                step_status,
                runs: position.runs,
                verdict,
            });
        }
    }
}
