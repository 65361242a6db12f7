//! Flow control in memory: the indexes of held and throttled rows and of
//! the slots held, the claim's admission, the release of a slot given back,
//! and the limits workers register; each decision `engine::flow`'s, as the
//! Postgres store's `flow_admit` and `flow_release` make it in SQL.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use pgbus_runtime::RunId;
use pgbus_runtime::WorkflowDefinition;
use pgbus_runtime::engine::RunStatus;
use pgbus_runtime::engine::flow::{
    Admission, Admitted, Candidate, FlowState, HeldRow, RateKey, SlotKey, free_slots, record_start,
    to_wake,
};

use super::{ClaimOrder, Rows, Step, StepStatus, due_key, is_open};

/// Where a row stands in the indexes: due, held back by a key, waiting for
/// a rate's window, holding slots (in progress).
#[derive(Debug, Default)]
pub(super) struct Placed {
    due: Option<ClaimOrder>,
    held: Option<(SlotKey, ClaimOrder)>,
    throttled: Option<(RateKey, (DateTime<Utc>, i64))>,
    pub(super) slots: Vec<SlotKey>,
    run: i64,
}

impl Placed {
    pub(super) fn of(id: i64, step: &Step) -> Self {
        let order = (step.view.priority, step.view.scheduled_at, id);
        Self {
            due: due_key(id, step),
            held: step
                .held
                .clone()
                .filter(|_| is_open(step))
                .map(|key| (key, order)),
            throttled: step
                .throttled
                .clone()
                .filter(|_| is_open(step))
                .map(|key| (key, (step.view.scheduled_at, id))),
            slots: if step.view.status == StepStatus::InProgress {
                step.slots.clone()
            } else {
                Vec::new()
            },
            run: step.run_id.0,
        }
    }
}

impl Rows {
    /// Takes a row's place out of the indexes.
    pub(super) fn unplace(&mut self, placed: &Placed) {
        if let Some(due) = &placed.due {
            self.due.remove(due);
        }
        if let Some((key, order)) = &placed.held
            && let Some(rows) = self.held.get_mut(key)
        {
            rows.remove(order);
            if rows.is_empty() {
                self.held.remove(key);
            }
        }
        if let Some((key, order)) = &placed.throttled
            && let Some(rows) = self.throttled.get_mut(key)
        {
            rows.remove(order);
            if rows.is_empty() {
                self.throttled.remove(key);
            }
        }
        for key in &placed.slots {
            self.give_back(key, placed.run);
        }
    }

    /// Puts a row's place in the indexes.
    pub(super) fn place(&mut self, placed: &Placed) {
        if let Some(due) = placed.due {
            self.due.insert(due);
        }
        if let Some((key, order)) = &placed.held {
            self.held.entry(key.clone()).or_default().insert(*order);
        }
        if let Some((key, order)) = &placed.throttled {
            self.throttled
                .entry(key.clone())
                .or_default()
                .insert(*order);
        }
        for key in &placed.slots {
            self.hold(key, placed.run);
        }
    }

    /// Run `run` holds `key` by one thing more (a step in progress, or as
    /// a run).
    fn hold(&mut self, key: &SlotKey, run: i64) {
        *self
            .holders
            .entry(key.clone())
            .or_default()
            .entry(run)
            .or_default() += 1;
    }

    /// Run `run` holds `key` by one thing fewer (the release is the
    /// caller's).
    fn give_back(&mut self, key: &SlotKey, run: i64) {
        let Some(runs) = self.holders.get_mut(key) else {
            return;
        };
        if let Some(count) = runs.get_mut(&run) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                runs.remove(&run);
            }
        }
        if runs.is_empty() {
            self.holders.remove(key);
        }
    }

    /// The slots of `key` held: the runs holding it, each once (as
    /// `flow_in_flight`).
    fn in_flight(&self, key: &SlotKey) -> usize {
        self.holders.get(key).map_or(0, BTreeMap::len)
    }

    /// As `flow_admit`, for the claim's candidate row `id`: admitted (what
    /// it takes, its starts written in the rate windows), or held back or
    /// throttled (written on the row, which leaves the claim's way) and
    /// `None`. Counts are read as they stand, rows held or throttled before
    /// it in the same claim included.
    pub(super) fn admit(&mut self, id: i64) -> Option<Admitted> {
        if self.flow.is_empty() {
            return Some(Admitted::default());
        }
        let now = self.now;
        let step = self.steps.get(&id)?;
        let run = self.runs.get(&step.run_id.0)?;
        let limits = self.flow.limits(&Candidate {
            workflow: &step.workflow,
            step: &step.view.step_name,
            queue: &step.view.queue,
            run_key: run.concurrency_key.as_deref(),
        });
        if limits.is_empty() {
            return Some(Admitted::default());
        }
        let mut state = FlowState::default();
        for (key, _) in &limits.concurrency {
            state.holders.insert(key.clone(), self.in_flight(key));
        }
        for (key, _) in &limits.rates {
            if let Some(log) = self.windows.get(key) {
                state.windows.insert(key.clone(), log.clone());
            }
        }
        let run_slots = run.slots.clone();
        match state.decide(&limits, &run_slots, now) {
            Admission::Admit(admitted) => {
                for (key, rate) in &limits.rates {
                    record_start(self.windows.entry(key.clone()).or_default(), *rate, now);
                }
                Some(admitted)
            }
            Admission::Hold(key) => {
                self.update_step(id, |step| step.set_held(Some(key)));
                None
            }
            Admission::Throttle { key, until } => {
                self.update_step(id, |step| {
                    step.view.scheduled_at = until;
                    step.set_throttled(Some(key));
                });
                None
            }
        }
    }

    /// The run of an admitted step holds its run slots (`slot = "run"`,
    /// `runs.slot_held`) from now until it leaves `ready` and `performing`.
    pub(super) fn take_run_slots(&mut self, run_id: RunId, slots: Vec<SlotKey>) {
        let Some(run) = self.runs.get_mut(&run_id.0) else {
            return;
        };
        let mut added = Vec::new();
        for key in slots {
            if !run.slots.contains(&key) {
                run.slots.push(key.clone());
                added.push(key);
            }
        }
        for key in added {
            self.hold(&key, run_id.0);
        }
    }

    /// As `flow_release(key)`: a slot of `key` was given back; as many held
    /// rows of the key as it has free slots, of `ready` runs, oldest first,
    /// are let go, due for the next claim to decide on.
    pub(super) fn release(&mut self, key: &SlotKey) {
        let Some(rows) = self.held.get(key) else {
            return;
        };
        let free = free_slots(self.flow.concurrency(key), self.in_flight(key));
        if free == 0 {
            return;
        }
        let rows: Vec<HeldRow> = rows
            .iter()
            .map(|&(priority, due, id)| HeldRow {
                id,
                priority,
                due,
                run_ready: self
                    .steps
                    .get(&id)
                    .and_then(|step| self.runs.get(&step.run_id.0))
                    .is_some_and(|run| run.summary.status == RunStatus::Ready),
            })
            .collect();
        for id in to_wake(free, rows) {
            self.update_step(id, |step| step.set_held(None));
        }
    }

    /// Sets a run's status, as every path that changes one does: a run that
    /// leaves `ready` and `performing` (paused, finished, cancelled) gives
    /// back the slots it holds as a run (`slot = "run"`), waking the rows
    /// they held (a step of it still in progress holds them until it ends);
    /// a run resumed from a pause lets go of its held rows, for its claim to
    /// decide again. A run that leaves `ready` between steps (cancelled,
    /// paused, finished by a skip) may have a row a release let go and no
    /// claim took: its keys (the workflow's, its key's, its steps' queues')
    /// are released again, as `flow_run_changed` does, so the slot that row
    /// never took goes to the next held row.
    pub(super) fn set_run_status(&mut self, run_id: RunId, status: RunStatus) {
        let Some(run) = self.runs.get_mut(&run_id.0) else {
            return;
        };
        let was = run.summary.status;
        run.summary.status = status;
        let going = matches!(status, RunStatus::Ready | RunStatus::Performing);
        let mut dropped = if going {
            Vec::new()
        } else {
            std::mem::take(&mut run.slots)
        };
        for key in &dropped {
            self.give_back(key, run_id.0);
        }
        if was == RunStatus::Ready && !going {
            dropped.extend(self.keys_of_run(run_id));
        }
        for key in &dropped {
            self.release(key);
        }
        if was == RunStatus::Paused && going {
            for id in self.step_ids(run_id) {
                if self.steps.get(&id).is_some_and(|step| step.held.is_some()) {
                    self.update_step(id, |step| step.set_held(None));
                }
            }
        }
    }

    /// The concurrency keys a run's rows may meet: its workflow's, its
    /// key's, and the queue of each of its steps.
    fn keys_of_run(&self, run_id: RunId) -> Vec<SlotKey> {
        let Some(run) = self.runs.get(&run_id.0) else {
            return Vec::new();
        };
        let workflow = run.summary.workflow.clone();
        let mut keys = vec![SlotKey::Workflow(workflow.clone())];
        if let Some(key) = &run.concurrency_key {
            keys.push(SlotKey::Key {
                workflow,
                key: key.clone(),
            });
        }
        for id in &run.step_ids {
            if let Some(step) = self.steps.get(id) {
                let queue = SlotKey::Queue(step.view.queue.clone());
                if !keys.contains(&queue) {
                    keys.push(queue);
                }
            }
        }
        keys
    }

    /// As `register_worker.sql`'s limits: each registered workflow's limits
    /// replaced by what its definition declares, each queue named given its
    /// limit; the held rows of a workflow whose concurrency limits changed,
    /// and of a queue whose limit did, are let go (a throttled row keeps its
    /// due time).
    pub(super) fn register_limits(
        &mut self,
        definitions: &[&'static WorkflowDefinition],
        queue_limits: &[(String, u32)],
    ) {
        let changed = self.flow.register(definitions, queue_limits);
        let let_go: Vec<i64> = self
            .held
            .iter()
            .flat_map(|(key, rows)| rows.iter().map(move |&(_, _, id)| (key, id)))
            .filter(|(key, id)| {
                self.steps.get(id).is_some_and(|step| {
                    changed
                        .iter()
                        .any(|change| change.covers(key, &step.workflow))
                })
            })
            .map(|(_, id)| id)
            .collect();
        for id in let_go {
            self.update_step(id, |step| step.set_held(None));
        }
    }

    /// Whether flow control lets an outcome hand the next step (of
    /// `workflow`, named `step`, on `queue`) to its worker.
    pub(super) fn flow_hands_off(&self, workflow: &str, step: &str, queue: &str) -> bool {
        self.flow.hands_off(workflow, step, queue)
    }
}
