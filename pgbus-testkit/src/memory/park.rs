//! Parking an attempt as `waiting`, starting a fan_out's children, and what a run's end changes for fan-out.

use chrono::{DateTime, Utc};
use pgbus_runtime::engine::{
    AttemptResult, BatchStatus, Park, ParkWait, RunState, RunStatus, StepStatus, plan_park,
};
use pgbus_runtime::store::{Claim, Parked};
use pgbus_runtime::{BatchView, ChildRun, EventKind, RunId};

use super::{BatchRow, Change, Rows};

impl Rows {
    /// As `park_step.sql` (and `start_children.sql` for a new batch): parks the
    /// claimed row as `waiting`, same attempt; `false` when the fence failed
    /// (a late completion, recorded as such), else how it parked.
    pub(super) fn park(
        &mut self,
        claim: &Claim,
        result: &AttemptResult,
        park: &Park,
        worker: &str,
        state: &RunState,
    ) -> Option<Parked> {
        let now = self.now;
        let fenced = self.steps.get(&claim.step_id).is_some_and(|step| {
            step.view.status == StepStatus::InProgress
                && step.view.attempt == claim.attempt
                && step.view.worker_id.as_deref() == Some(worker)
        });
        if !fenced {
            self.late(claim, result);
            return None;
        }
        let plan = plan_park(state, park);
        let wait = park.wait();
        let (name, due_ms, from_first_park) = (wait.signal, wait.due_ms, wait.from_first_park);
        let seen_to = self
            .steps
            .get(&claim.step_id)
            .and_then(|step| step.signals_seen_to)
            .max(wait.turned_down_to.map(|id| id.0));
        let (woken, adopt) = self.wakes_at_park(claim.run_id, &wait, seen_to);
        if let Some(batch) = adopt
            .and_then(|id| self.batches.get_mut(&id))
            .filter(|b| b.view.status == BatchStatus::Open)
        {
            batch.view.parent_step_id = claim.step_id;
        }
        let parked = self.update_step(claim.step_id, |step| {
            step.signals_seen_to = seen_to;
            let since = *step.view.waiting_since.get_or_insert(now);
            step.view.status = if woken {
                StepStatus::Scheduled
            } else {
                StepStatus::Waiting
            };
            step.view.waiting_for = name.map(str::to_owned);
            step.open_ended = !from_first_park;
            step.view.scheduled_at = if woken {
                now
            } else {
                add_ms(if from_first_park { since } else { now }, due_ms)
            };
            step.view.stall_at = None;
            if result.output.is_some() {
                step.view.output.clone_from(&result.output);
            }
            step.clone()
        });
        let step = parked?;
        self.tokens.remove(&claim.step_id);
        let mut events = plan.events;
        if let Park::Batch { children } = park {
            let (batch_id, total) = self.start_children(claim, children, worker);
            if let Some(event) = events.first_mut() {
                event.details = Some(serde_json::json!({ "batch_id": batch_id, "total": total }));
            }
        }
        self.apply_change(
            claim.run_id,
            &claim.workflow,
            &Change {
                cancel_open_steps: false,
                next: None,
                run_status: plan.run_status,
                current_step: Some(&claim.step_name),
                run_error: None,
                events: &events,
            },
            Some(&step),
            worker,
        );
        Some(Parked {
            woken,
            run_status: plan.run_status,
        })
    }

    /// What `park_step.sql` checks under the run's lock: whether an unconsumed
    /// signal of `name` above `seen_to` (one that came after the claim, or past
    /// its page) or a resolution of the awaited batch wakes the row at once;
    /// and the batch of an earlier attempt the row takes over.
    fn wakes_at_park(
        &self,
        run_id: RunId,
        wait: &ParkWait<'_>,
        seen_to: Option<i64>,
    ) -> (bool, Option<i64>) {
        let signal_arrived = wait.signal.is_some_and(|name| {
            self.runs.get(&run_id.0).is_some_and(|run| {
                run.signals.iter().any(|g| {
                    g.name == name && g.consumed_by.is_none() && g.id.0 > seen_to.unwrap_or(0)
                })
            })
        });
        let batch_resolved = wait
            .batch_id
            .and_then(|id| self.batches.get(&id))
            .is_some_and(|b| b.view.status != BatchStatus::Open);
        let adopt = wait.batch_id.filter(|_| wait.adopt);
        (signal_arrived || batch_resolved, adopt)
    }

    /// As `start_children.sql`: the batch, each child run with its first step
    /// and a `started` event. Returns `(batch id, total)`.
    fn start_children(&mut self, claim: &Claim, children: &[ChildRun], actor: &str) -> (i64, i64) {
        let now = self.now;
        let batch_id = self.next_batch;
        self.next_batch += 1;
        let total = i32::try_from(children.len()).unwrap_or(i32::MAX);
        self.batches.insert(
            batch_id,
            BatchRow {
                run_id: claim.run_id,
                view: BatchView {
                    id: batch_id,
                    parent_step_id: claim.step_id,
                    total,
                    finished: 0,
                    cancelled: 0,
                    status: BatchStatus::Open,
                    created_at: now,
                    resolved_at: None,
                    unrunnable_child: None,
                },
            },
        );
        for child in children {
            let Some(plan) = self.child_plan(child.definition) else {
                continue;
            };
            let id = self.create_run(
                child.definition,
                plan,
                child.input.clone(),
                (None, None),
                Some(batch_id),
            );
            self.event(
                id,
                None,
                EventKind::Started,
                actor,
                Some("fan_out".to_owned()),
            );
            self.set_details(Some(serde_json::json!({
                "parent_run_id": claim.run_id,
                "batch_id": batch_id,
            })));
        }
        (batch_id, i64::from(total))
    }

    /// As `count_child.sql`: a child run ended with `status`; the last child of
    /// the batch resolves it and wakes the parent's parked step.
    pub(super) fn count_child(&mut self, batch_id: i64, status: RunStatus, actor: &str) {
        let now = self.now;
        let Some(batch) = self
            .batches
            .get_mut(&batch_id)
            .filter(|b| b.view.status == BatchStatus::Open)
        else {
            return;
        };
        if status == RunStatus::Finished {
            batch.view.finished += 1;
        } else {
            batch.view.cancelled += 1;
        }
        if batch.view.finished + batch.view.cancelled < batch.view.total {
            return;
        }
        batch.view.status = if batch.view.cancelled > 0 {
            BatchStatus::Failed
        } else {
            BatchStatus::Succeeded
        };
        batch.view.resolved_at = Some(now);
        let batch = batch.clone();
        self.wake_parent(&batch, actor);
    }

    /// Wakes the parked step of a resolved batch, with a `batch_resolved` event.
    pub(super) fn wake_parent(&mut self, batch: &BatchRow, actor: &str) {
        let now = self.now;
        let waiting = self
            .steps
            .get(&batch.view.parent_step_id)
            .is_some_and(|step| step.view.status == StepStatus::Waiting);
        if !waiting {
            return;
        }
        let Some(step) = self.update_step(batch.view.parent_step_id, |step| {
            step.view.status = StepStatus::Scheduled;
            step.view.scheduled_at = now;
            step.clone()
        }) else {
            return;
        };
        self.event(
            batch.run_id,
            Some(&step),
            EventKind::BatchResolved,
            actor,
            Some(batch.view.status.as_str().to_owned()),
        );
        self.set_details(Some(serde_json::json!({
            "batch_id": batch.view.id,
            "total": batch.view.total,
            "finished": batch.view.finished,
            "cancelled": batch.view.cancelled,
        })));
    }

    /// As `cancel_children.sql`: cancels the open child runs of `run_id`'s open
    /// batches, and theirs, all the way down, and closes those batches.
    pub(super) fn cancel_children(&mut self, run_id: RunId, actor: &str) {
        let now = self.now;
        let reason = format!("parent run {run_id} was cancelled");
        let mut parents = vec![run_id];
        while let Some(parent) = parents.pop() {
            let open: Vec<i64> = self
                .batches
                .values()
                .filter(|b| b.run_id == parent && b.view.status == BatchStatus::Open)
                .map(|b| b.view.id)
                .collect();
            for batch_id in open {
                if let Some(batch) = self.batches.get_mut(&batch_id) {
                    batch.view.status = BatchStatus::Failed;
                    batch.view.resolved_at = Some(now);
                }
                let children: Vec<i64> = self
                    .runs
                    .iter()
                    .filter(|(_, run)| run.parent_batch_id == Some(batch_id))
                    .map(|(id, _)| *id)
                    .collect();
                for child in children {
                    let child = RunId(child);
                    let ended = self
                        .runs
                        .get(&child.0)
                        .is_none_or(|run| run.summary.status.is_terminal());
                    parents.push(child);
                    if ended {
                        continue;
                    }
                    if let Some(run) = self.runs.get_mut(&child.0) {
                        run.summary.updated_at = now;
                        run.cancelled_at = Some(now);
                    }
                    self.set_run_status(child, RunStatus::Cancelled);
                    self.cancel_open_steps(child);
                    self.event(
                        child,
                        None,
                        EventKind::Cancelled,
                        actor,
                        Some(reason.clone()),
                    );
                    self.set_details(Some(serde_json::json!({ "cancelled_with": run_id })));
                }
            }
        }
    }
}

fn add_ms(at: DateTime<Utc>, ms: u64) -> DateTime<Utc> {
    at.checked_add_signed(chrono::Duration::milliseconds(
        i64::try_from(ms).unwrap_or(i64::MAX),
    ))
    .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
