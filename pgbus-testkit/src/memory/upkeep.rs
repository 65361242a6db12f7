//! The sweep's upkeep: stalled attempts, batches, retention, and a lost claim for tests.

use chrono::{DateTime, Utc};
use pgbus_runtime::engine::{BatchStatus, RunStatus, StepStatus};
use pgbus_runtime::store::{Claim, Stalled};
use pgbus_runtime::view::Missing;
use pgbus_runtime::{RunId, WorkflowDefinition};

use super::Rows;

impl Rows {
    /// As `resolve_batches.sql`, for the sweep: open batches whose children all
    /// ended are counted again from the children and resolved. Returns how many.
    pub(crate) fn resolve_batches(&mut self, limit: i64) -> u64 {
        let now = self.now;
        let stuck: Vec<i64> = self
            .batches
            .values()
            .filter(|b| b.view.status == BatchStatus::Open)
            .filter(|b| {
                !self.runs.values().any(|run| {
                    run.parent_batch_id == Some(b.view.id) && !run.summary.status.is_terminal()
                })
            })
            .map(|b| b.view.id)
            .take(usize::try_from(limit).unwrap_or(0))
            .collect();
        let mut resolved = 0;
        for batch_id in stuck {
            let finished = self
                .runs
                .values()
                .filter(|run| {
                    run.parent_batch_id == Some(batch_id)
                        && run.summary.status == RunStatus::Finished
                })
                .count();
            let Some(batch) = self.batches.get_mut(&batch_id) else {
                continue;
            };
            batch.view.finished = i32::try_from(finished).unwrap_or(i32::MAX);
            batch.view.cancelled = batch.view.total - batch.view.finished;
            batch.view.status = if batch.view.finished >= batch.view.total {
                BatchStatus::Succeeded
            } else {
                BatchStatus::Failed
            };
            batch.view.resolved_at = Some(now);
            let batch = batch.clone();
            self.wake_parent(&batch, "sweep");
            resolved += 1;
        }
        resolved
    }

    /// As `stalled.sql`: up to `limit` attempts in progress past their stall
    /// horizon (`timeout`), or held by a crashed worker silent for longer than
    /// `lost_ms` (`worker_lost`).
    pub(crate) fn stalled(&self, lost_ms: i64, limit: i64) -> Vec<Stalled> {
        let now = self.now;
        let lost_before = before(now, lost_ms);
        self.steps
            .iter()
            .filter(|(_, step)| step.view.status == StepStatus::InProgress)
            .filter_map(|(id, step)| {
                let detection = if step.view.stall_at.is_some_and(|at| at <= now) {
                    "timeout"
                } else {
                    let silent_since = step
                        .view
                        .worker_id
                        .as_deref()
                        .and_then(|worker| self.crashed.get(worker));
                    if silent_since.is_none_or(|since| *since >= lost_before) {
                        return None;
                    }
                    "worker_lost"
                };
                let claim = Claim {
                    step_id: *id,
                    reattempts: step.reattempts,
                    scheduled_at: step.view.scheduled_at,
                    timeout_ms: step.timeout_ms,
                    waiting_since: step.view.waiting_since,
                    ..Claim::new(
                        step.run_id,
                        step.workflow.clone(),
                        step.view.step_name.clone(),
                        step.view.attempt,
                        step.view.started_at.unwrap_or(now),
                    )
                };
                Some(Stalled {
                    claim,
                    worker_id: step.view.worker_id.clone().unwrap_or_default(),
                    detection: detection.to_owned(),
                })
            })
            .take(usize::try_from(limit).unwrap_or(0))
            .collect()
    }

    /// As `delete_expired_runs.sql`: deletes up to `limit` finished and
    /// cancelled runs that ended more than `retention_ms` ago (a run with no
    /// end time counts from its start), with their rows. Returns how many.
    pub(crate) fn delete_expired_runs(&mut self, retention_ms: i64, limit: i64) -> u64 {
        let expired_before = before(self.now, retention_ms);
        let expired: Vec<i64> = self
            .runs
            .iter()
            .filter(|(_, run)| {
                let ended_at = run
                    .summary
                    .finished_at
                    .or(run.cancelled_at)
                    .unwrap_or(run.summary.created_at);
                run.summary.status.is_terminal() && ended_at < expired_before
            })
            .map(|(id, _)| *id)
            .take(usize::try_from(limit).unwrap_or(0))
            .collect();
        let mut deleted = 0;
        for id in expired {
            let Some(run) = self.runs.remove(&id) else {
                continue;
            };
            for step in run.step_ids {
                if let Some(row) = self.steps.remove(&step) {
                    self.unplace(&super::flow::Placed::of(step, &row));
                }
                self.tokens.remove(&step);
            }
            self.batches.retain(|_, batch| batch.run_id.0 != id);
            deleted += 1;
        }
        deleted
    }

    /// As `register_worker.sql`: records (or replaces) `worker`'s definitions
    /// and the queues it claims from, and keeps each definition for good;
    /// each definition's limits replace its workflow's, each of
    /// `queue_limits` (`(queue, limit)`) is upserted.
    pub(crate) fn register_worker(
        &mut self,
        worker: &str,
        definitions: &[&'static WorkflowDefinition],
        queues: &[String],
        queue_limits: &[(String, u32)],
    ) {
        self.workers.insert(worker.to_owned(), definitions.to_vec());
        self.claims.insert(worker.to_owned(), queues.to_vec());
        for definition in definitions {
            self.definitions
                .entry(definition.options_digest)
                .or_insert(definition);
        }
        self.register_limits(definitions, queue_limits);
    }

    /// The definitions worker `worker` registered last, if it did.
    pub(crate) fn registered(&self, worker: &str) -> Option<&[&'static WorkflowDefinition]> {
        self.workers.get(worker).map(Vec::as_slice)
    }

    /// What no live worker (registered, and not dead for longer than
    /// `lost_ms`) has of a row of `workflow` at `step` on `queue`: the
    /// workflow, the step in every live worker's definition of it (a
    /// gravestone counts as held), or, of the live workers that hold the
    /// step, one claiming from `queue`; `None` when a live worker can run
    /// it. The rule of `Missing::of`, as the Postgres reads decide it in SQL.
    pub(super) fn missing(
        &self,
        workflow: &str,
        step: &str,
        queue: &str,
        lost_ms: i64,
    ) -> Option<Missing> {
        let lost_before = before(self.now, lost_ms);
        let live: Vec<(&str, &'static WorkflowDefinition)> = self
            .workers
            .iter()
            .filter(|(id, _)| {
                self.crashed
                    .get(id.as_str())
                    .is_none_or(|since| *since >= lost_before)
            })
            .flat_map(|(id, definitions)| definitions.iter().map(move |d| (id.as_str(), *d)))
            .filter(|(_, definition)| definition.name == workflow)
            .collect();
        let holders: Vec<&str> = live
            .iter()
            .filter(|(_, definition)| definition.entry(step).is_some())
            .map(|(id, _)| *id)
            .collect();
        let claims = |id: &str| {
            self.claims
                .get(id)
                .is_some_and(|queues| queues.iter().any(|q| q == queue))
        };
        Missing::of(
            !live.is_empty(),
            !holders.is_empty(),
            holders.iter().any(|id| claims(id)),
        )
    }

    /// Whether a live worker registered `workflow` while none of those has
    /// `step` in its definition of it: the grace rule's test of a row (the
    /// row's queue plays no part: a missing step is decided before it).
    pub(super) fn undefined(&self, workflow: &str, step: &str, lost_ms: i64) -> bool {
        self.missing(workflow, step, "", lost_ms) == Some(Missing::Step)
    }

    /// As `undefined_steps.sql`: up to `limit` rows due for longer than
    /// `grace_ms`, their run `ready`, whose step no live worker's definition
    /// of their workflow holds while some live worker registered the
    /// workflow; oldest due first.
    pub(crate) fn undefined_steps(&self, grace_ms: i64, lost_ms: i64, limit: i64) -> Vec<Claim> {
        let now = self.now;
        let due_before = before(now, grace_ms);
        let mut found: Vec<(DateTime<Utc>, i64)> = self
            .due
            .iter()
            .filter(|(_, at, _)| *at <= due_before)
            .filter(|(_, _, id)| {
                self.steps.get(id).is_some_and(|step| {
                    self.runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
                        && self.undefined(&step.workflow, &step.view.step_name, lost_ms)
                })
            })
            .map(|(_, at, id)| (*at, *id))
            .collect();
        found.sort_unstable();
        found
            .into_iter()
            .take(usize::try_from(limit).unwrap_or(0))
            .filter_map(|(_, id)| {
                let step = self.steps.get(&id)?;
                Some(Claim {
                    step_id: id,
                    reattempts: step.reattempts,
                    scheduled_at: step.view.scheduled_at,
                    timeout_ms: step.timeout_ms,
                    waiting_since: step.view.waiting_since,
                    ..Claim::new(
                        step.run_id,
                        step.workflow.clone(),
                        step.view.step_name.clone(),
                        step.view.attempt,
                        now,
                    )
                })
            })
            .collect()
    }

    /// Moves the in-progress claim of `run_id` to another worker, as a sweep or a
    /// second worker would take it, and tells the body; `false` when nothing of
    /// the run is in progress.
    pub(crate) fn lose_claim(&mut self, run_id: RunId) -> bool {
        let in_progress = self.step_ids(run_id).into_iter().find(|id| {
            self.steps
                .get(id)
                .is_some_and(|step| step.view.status == StepStatus::InProgress)
        });
        let Some(id) = in_progress else {
            return false;
        };
        self.update_step(id, |step| {
            step.view.worker_id = Some("elsewhere".to_owned());
        });
        if let Some(token) = self.tokens.remove(&id) {
            token.cancel();
        }
        true
    }
}

/// `ms` milliseconds before `now`, or the earliest time.
pub(super) fn before(now: DateTime<Utc>, ms: i64) -> DateTime<Utc> {
    now.checked_sub_signed(chrono::Duration::milliseconds(ms))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}
