//! The sweep over any store: runs past their deadline, stalled attempts, the
//! grace rule's due rows no live worker can run, unresolved batches,
//! retention.

use tracing::{info, info_span};

use super::{Ended, Stalled, Store};
use crate::definition::WorkflowDefinition;
use crate::engine::{
    AttemptResult, Plan, StallAction, StepOutcome, stalled_result, undefined_result,
};
use crate::error::Error;
use crate::worker::SweepReport;

/// The log target of what the step loop and the sweep record: the worker's,
/// as before they moved here, so `RUST_LOG=pgbus_runtime::worker=debug` and
/// log readers that count by target keep working.
const WORKER_TARGET: &str = "pgbus_runtime::worker";

/// How one sweep repairs and how much it does.
#[derive(Debug, Clone, Copy)]
pub struct SweepSettings {
    /// What a stalled attempt's run does next.
    pub stall_action: StallAction,
    /// A worker silent for longer than this (ms) has lost its attempts.
    pub lost_ms: i64,
    /// Finished and cancelled runs older than this (ms) are deleted; `None`
    /// keeps them.
    pub retention_ms: Option<i64>,
    /// At most this many stalled attempts per sweep.
    pub stalled_limit: i64,
    /// At most this many batches resolved per sweep.
    pub batch_limit: i64,
    /// Runs deleted per batch of retention, and at most this many batches.
    pub retention_batch: i64,
    /// See `retention_batch`.
    pub retention_batches: usize,
    /// The grace rule: a due row whose step no live worker's definition holds
    /// (while some live worker registered its workflow) is paused with
    /// [`StepNotDefined`](crate::StepNotDefined) once it has been due for
    /// longer than this (ms); `None` turns the rule off. "Live": a heartbeat
    /// within `lost_ms`. See [`Store::undefined_steps`].
    pub undefined_grace_ms: Option<i64>,
    /// At most this many rows paused by the grace rule per sweep.
    pub undefined_limit: i64,
    /// At most this many runs past their deadline acted on per sweep (see
    /// [`Store::expire_deadlines`]); the next sweep goes on.
    pub deadline_limit: i64,
}

/// What the sweep repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// A stalled attempt, ended with the stall action.
    Stalled,
    /// A due row no live worker can run, paused by the grace rule (never
    /// claimed: `Stalled::worker_id` is empty, `detection` is
    /// `step_not_defined`).
    UndefinedStep,
}

/// A stalled attempt the sweep ended (or a due row it paused), for the
/// owner's report.
#[derive(Debug)]
pub struct Repaired<'a> {
    /// What kind of repair.
    pub repair: Repair,
    /// The attempt and who held it.
    pub stalled: &'a Stalled,
    /// What was recorded for it.
    pub result: &'a AttemptResult,
    /// The plan applied.
    pub plan: &'a Plan,
}

/// Sweeps `store` once: first the runs past their deadline are cancelled or
/// paused ([`Store::expire_deadlines`], so a stalled attempt of such a run is
/// not reattempted first); each stalled attempt ends with a
/// [`StepStalled`](crate::StepStalled) error, the stall action and a
/// `stall_detected` event (fenced: one that ended meanwhile is left alone);
/// with `undefined_grace_ms` set, due rows no live worker can run are paused
/// (the grace rule, see [`Store::undefined_steps`]); batches whose children
/// all ended are resolved; then retention. `definition`
/// finds a registered workflow (an unregistered one's stalled run pauses, as a
/// reattempt needs the definition). `repaired` hears of each repair.
///
/// # Errors
/// The store's.
pub async fn sweep<S: Store>(
    store: &S,
    settings: &SweepSettings,
    definition: impl Fn(&str) -> Option<&'static WorkflowDefinition>,
    repaired: impl Fn(&Repaired<'_>),
) -> Result<SweepReport, Error> {
    let mut report = SweepReport {
        deadlines_exceeded: expire_deadlines(store, settings.deadline_limit).await?,
        ..SweepReport::default()
    };
    for stalled in store
        .stalled(settings.lost_ms, settings.stalled_limit)
        .await?
    {
        let claim = &stalled.claim;
        let registered = definition(&claim.workflow);
        let result = stalled_result(
            settings.stall_action,
            registered.is_some(),
            &claim.step_name,
            claim.attempt,
            claim.reattempts,
            &stalled.detection,
        );
        let definition = registered.unwrap_or(&crate::__private::STAND_IN_DEFINITION);
        match store.sweep_attempt(definition, &stalled, &result).await? {
            // A sweep passes no handoff, so it never continues a run.
            Ended::Applied(plan) | Ended::Continued(plan, _) => {
                report.repaired += 1;
                metrics::counter!(crate::metric::STALLS, "detection" => stalled.detection.clone())
                    .increment(1);
                metrics::counter!(crate::metric::SWEEP_REPAIRS, "repair" => "stalled_attempt")
                    .increment(1);
                // The sweep runs outside any attempt's span: say which.
                let _span = info_span!(target: WORKER_TARGET, "pgbus.sweep", pgbus.workflow = %claim.workflow, pgbus.run_id = %claim.run_id, pgbus.step = %claim.step_name, pgbus.attempt = claim.attempt, pgbus.stalled_worker = %stalled.worker_id)
                .entered();
                repaired(&Repaired {
                    repair: Repair::Stalled,
                    stalled: &stalled,
                    result: &result,
                    plan: &plan,
                });
            }
            // A sweep never parks; a fence it lost is an attempt that ended
            // meanwhile.
            Ended::Late | Ended::Parked(_) => report.left_alone += 1,
        }
    }
    if let Some(grace_ms) = settings.undefined_grace_ms {
        report.undefined_paused = pause_undefined(store, settings, grace_ms, &repaired).await?;
    }
    report.batches_resolved = store.resolve_batches(settings.batch_limit).await?;
    if report.batches_resolved > 0 {
        metrics::counter!(crate::metric::BATCHES_RESOLVED).increment(report.batches_resolved);
        metrics::counter!(crate::metric::SWEEP_REPAIRS, "repair" => "batch")
            .increment(report.batches_resolved);
    }
    if let Some(retention_ms) = settings.retention_ms {
        for _ in 0..settings.retention_batches {
            let deleted = store
                .delete_expired_runs(retention_ms, settings.retention_batch)
                .await?;
            report.runs_deleted += deleted;
            if deleted < u64::try_from(settings.retention_batch).unwrap_or(0) {
                break;
            }
        }
    }
    if report.runs_deleted > 0 {
        metrics::counter!(crate::metric::RUNS_DELETED).increment(report.runs_deleted);
    }
    Ok(report)
}

/// Acts on the runs past their deadline (see [`Store::expire_deadlines`]);
/// how many.
async fn expire_deadlines<S: Store>(store: &S, limit: i64) -> Result<usize, Error> {
    // Boxed: one transaction per run makes a large future, which would
    // otherwise grow every future that sweeps.
    let expired = Box::pin(store.expire_deadlines(limit)).await?;
    for (run_id, action) in &expired {
        metrics::counter!(crate::metric::DEADLINES_EXCEEDED, "action" => action.as_str())
            .increment(1);
        info!(
            target: WORKER_TARGET,
            { pgbus.run_id = %run_id, pgbus.action = action.as_str() },
            "run past its deadline"
        );
    }
    Ok(expired.len())
}

/// The grace rule: pauses the due rows no live worker can run (see
/// [`Store::undefined_steps`]); how many.
async fn pause_undefined<S: Store>(
    store: &S,
    settings: &SweepSettings,
    grace_ms: i64,
    repaired: &impl Fn(&Repaired<'_>),
) -> Result<usize, Error> {
    let mut paused = 0;
    for claim in store
        .undefined_steps(grace_ms, settings.lost_ms, settings.undefined_limit)
        .await?
    {
        let result = undefined_result(&claim.workflow, &claim.step_name);
        let ended = store
            .pause_undefined(&claim, &result, grace_ms, settings.lost_ms)
            .await?;
        let (Ended::Applied(plan) | Ended::Continued(plan, _)) = ended else {
            // Claimed, ended or given a worker meanwhile.
            continue;
        };
        paused += 1;
        metrics::counter!(crate::metric::SWEEP_REPAIRS, "repair" => "undefined_step").increment(1);
        let _span = info_span!(target: WORKER_TARGET, "pgbus.sweep", pgbus.workflow = %claim.workflow, pgbus.run_id = %claim.run_id, pgbus.step = %claim.step_name, pgbus.attempt = claim.attempt)
            .entered();
        let stalled = Stalled {
            claim,
            worker_id: String::new(),
            detection: "step_not_defined".to_owned(),
        };
        repaired(&Repaired {
            repair: Repair::UndefinedStep,
            stalled: &stalled,
            result: &result,
            plan: &plan,
        });
    }
    Ok(paused)
}

/// Whether a repair's outcome reattempts the step (a recovery under way)
/// rather than ending the run's progress.
#[must_use]
pub fn repair_message(plan: &Plan) -> &'static str {
    if plan.step_outcome == StepOutcome::Reattempted {
        "stalled attempt repaired; the step runs again"
    } else {
        "stalled attempt ended by the stall action"
    }
}
