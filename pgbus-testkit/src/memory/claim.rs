//! Claiming due steps, with what their gates read, and when the next one is due.

use chrono::{DateTime, Utc};
use pgbus_runtime::context::CancellationToken;
use pgbus_runtime::engine::{BatchState, BatchStatus, RunStatus, StepStatus, StoredSignal};
use pgbus_runtime::store::{Claim, Claimer, Registered};
use pgbus_runtime::{EventKind, RunId, SignalView};

use super::{CRASHED_WORKER, Rows, Run, Step};

impl Rows {
    /// As `claim.sql`, one row: the due step a claim takes first, for
    /// `claimer`'s workflows and queues: lowest priority number, then earliest
    /// due, then oldest row; runs `ready`. Each candidate goes through the
    /// flow control's admission first: one held back or throttled leaves the
    /// claim's way and the next is decided, so no row waits behind it.
    pub(crate) fn claim(&mut self, claimer: &Claimer<'_>) -> Option<Claim> {
        let now = self.now;
        let worker = claimer.worker_id;
        let (step_id, admitted) = loop {
            let step_id = self.next_claimable(claimer.registered, Some(claimer.queues))?;
            if let Some(admitted) = self.admit(step_id) {
                break (step_id, admitted);
            }
        };
        let step = self.update_step(step_id, |step| {
            step.view.status = StepStatus::InProgress;
            step.view.started_at = Some(now);
            step.view.worker_id = Some(worker.to_owned());
            let stall_ms = step.timeout_ms.unwrap_or(claimer.stall_threshold_ms);
            step.view.stall_at = now.checked_add_signed(chrono::Duration::milliseconds(stall_ms));
            step.slots = admitted.step_slots;
            step.clone()
        })?;
        self.set_run_status(step.run_id, RunStatus::Performing);
        self.take_run_slots(step.run_id, admitted.run_slots);
        let run = self.runs.get_mut(&step.run_id.0)?;
        run.summary.updated_at = now;
        let input = run.input.clone();
        // As claim.sql: a worker of another digest takes the run over, with
        // a `definition_changed` event before the claim's `step_started`.
        let changed = claimer
            .registered
            .digest(&step.workflow)
            .filter(|digest| *digest != run.definition_digest)
            .map(|digest| {
                let old = std::mem::replace(&mut run.definition_digest, digest.to_owned());
                serde_json::json!({ "old_digest": old, "new_digest": digest })
            });
        if let Some(details) = changed {
            self.event(
                step.run_id,
                Some(&step),
                EventKind::DefinitionChanged,
                worker,
                None,
            );
            self.set_details(Some(details));
        }
        self.event(
            step.run_id,
            Some(&step),
            EventKind::StepStarted,
            worker,
            None,
        );
        let cancellation = CancellationToken::new();
        self.tokens.insert(step_id, cancellation.clone());
        let wait_for =
            step.view.waiting_for.clone().or_else(|| {
                run_plan_wait_for(self.runs.get(&step.run_id.0)?, &step.view.step_name)
            });
        let signals = wait_for
            .map(|name| self.gate_signals(&step, &name))
            .unwrap_or_default();
        let batch = self.latest_batch(&step, step_id);
        let timed_out_before = step.reattempts > 0
            && self.runs.get(&step.run_id.0).is_some_and(|run| {
                run.events.iter().any(|e| {
                    e.event == EventKind::WaitTimedOut
                        && e.step_name.as_deref() == Some(step.view.step_name.as_str())
                        && e.attempt == Some(step.view.attempt - 1)
                })
            });
        Some(Claim {
            step_id,
            reattempts: step.reattempts,
            scheduled_at: step.view.scheduled_at,
            timeout_ms: step.timeout_ms,
            input,
            outputs: self.outputs(step.run_id),
            waiting_since: step.view.waiting_since,
            signals,
            batch,
            timed_out_before,
            cancellation,
            tick: self.run_tick(step.run_id),
            ..Claim::new(
                step.run_id,
                step.workflow.clone(),
                step.view.step_name.clone(),
                step.view.attempt,
                now,
            )
        })
    }

    /// The row a claim takes first: lowest priority number, then earliest due,
    /// then oldest, among the due rows whose run is `ready` and not past its
    /// deadline, and whose step `registered` holds (a row it lacks is passed
    /// over, as claim.sql does).
    fn next_claimable(&self, registered: &Registered, queues: Option<&[String]>) -> Option<i64> {
        let now = self.now;
        let mut from = (i16::MIN, DateTime::<Utc>::MIN_UTC, i64::MIN);
        loop {
            // One priority at a time, up to the rows not yet due.
            let mut priority = None;
            for &(p, at, id) in self.due.range(from..) {
                match priority {
                    None => priority = Some(p),
                    Some(current) if current != p => break,
                    Some(_) => {}
                }
                if at > now {
                    break;
                }
                let claimable = self.steps.get(&id).is_some_and(|step| {
                    registered.has_step(&step.workflow, &step.view.step_name)
                        && queues.is_none_or(|queues| queues.contains(&step.view.queue))
                        && self
                            .runs
                            .get(&step.run_id.0)
                            .is_some_and(|run| run.summary.status == RunStatus::Ready)
                        && !self.past_deadline(step.run_id)
                });
                if claimable {
                    return Some(id);
                }
            }
            from = (
                priority?.checked_add(1)?,
                DateTime::<Utc>::MIN_UTC,
                i64::MIN,
            );
        }
    }

    /// The run's signals named `name` that the gate of `step` may take, as
    /// claim.sql brings them: the one an attempt of the same step consumed,
    /// then at most a page of unconsumed ones above the row's
    /// `signals_seen_to`, oldest first.
    fn gate_signals(&self, step: &Step, name: &str) -> Vec<StoredSignal> {
        let Some(run) = self.runs.get(&step.run_id.0) else {
            return Vec::new();
        };
        let stored = |g: &SignalView, taken_before| StoredSignal {
            id: g.id,
            name: g.name.clone(),
            payload: g.payload.clone(),
            taken_before,
        };
        let named = run.signals.iter().filter(|g| g.name == name);
        let taken = named
            .clone()
            .find(|g| {
                g.consumed_by
                    .and_then(|by| self.steps.get(&by))
                    .is_some_and(|consumer| {
                        consumer.run_id == step.run_id
                            && consumer.view.step_name == step.view.step_name
                    })
            })
            .map(|g| stored(g, true));
        let seen_to = step.signals_seen_to.unwrap_or(0);
        taken
            .into_iter()
            .chain(
                named
                    .filter(|g| g.consumed_by.is_none() && g.id.0 > seen_to)
                    .take(pgbus_runtime::executor::SIGNAL_PAGE)
                    .map(|g| stored(g, false)),
            )
            .collect()
    }

    /// Claims the next due step for a worker that dies at once: the row stays in
    /// progress under a worker named after [`CRASHED_WORKER`], whose heartbeat
    /// stopped now. Returns the
    /// run, if a step was due.
    pub(crate) fn crash_next(&mut self, claimer: &Claimer<'_>) -> Option<RunId> {
        let worker = format!("{CRASHED_WORKER}-{}", self.crashed.len() + 1);
        let claim = self.claim(&Claimer {
            worker_id: &worker,
            ..*claimer
        })?;
        self.tokens.remove(&claim.step_id);
        self.worker_died(&worker);
        Some(claim.run_id)
    }

    /// Records that `worker` stopped heartbeating now, unless it had already.
    pub(crate) fn worker_died(&mut self, worker: &str) {
        let now = self.now;
        self.crashed.entry(worker.to_owned()).or_insert(now);
    }

    /// When the next claimable step is due, if any: a scheduled row, or a
    /// waiting one at the end of its `wait_timeout`. A row parked with no end of
    /// its own (a signal without a timeout, a batch) is not counted: only a
    /// signal or its children wake it, and a clock jumped to its far due time
    /// would only park it again. A row held back by a concurrency limit is
    /// not counted either: a release wakes it, not the clock. Only rows of
    /// steps `registered` holds count.
    pub(crate) fn next_due(&self, registered: &Registered) -> Option<DateTime<Utc>> {
        self.steps
            .values()
            .filter(|step| {
                (step.view.status == StepStatus::Scheduled
                    || (step.view.status == StepStatus::Waiting && !step.open_ended))
                    && step.held.is_none()
                    && registered.has_step(&step.workflow, &step.view.step_name)
                    && self
                        .runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
                    && !self.past_deadline(step.run_id)
            })
            .map(|step| step.view.scheduled_at)
            .min()
    }

    /// The earliest due row of a `ready` run that `registered`, claiming
    /// from `queues`, cannot run (its workflow or its step missing, or its
    /// queue not claimed), with its due time: what
    /// `TestEnv::run_to_completion` names when nothing else is left to run.
    /// Rows parked with no end of their own are not due, as for
    /// [`Rows::next_due`].
    pub(crate) fn stuck(
        &self,
        registered: &Registered,
        queues: &[String],
    ) -> Option<(DateTime<Utc>, RunId)> {
        self.steps
            .values()
            .filter(|step| {
                (step.view.status == StepStatus::Scheduled
                    || (step.view.status == StepStatus::Waiting && !step.open_ended))
                    && step.held.is_none()
                    && (!registered.has_step(&step.workflow, &step.view.step_name)
                        || !queues.contains(&step.view.queue))
                    && self
                        .runs
                        .get(&step.run_id.0)
                        .is_some_and(|run| run.summary.status == RunStatus::Ready)
            })
            .map(|step| (step.view.scheduled_at, step.run_id))
            .min()
    }
}

/// The signal a step of `run` waits for, from the run's step plan.
fn run_plan_wait_for(run: &Run, step: &str) -> Option<String> {
    run.step_plan
        .iter()
        .find(|planned| planned.name == step)
        .and_then(|planned| planned.wait_for.clone())
}

impl Rows {
    /// The latest batch of any attempt of `step` (row `step_id`), as
    /// claim.sql finds it.
    fn latest_batch(&self, step: &Step, step_id: i64) -> Option<BatchState> {
        self.batches
            .values()
            .filter(|b| {
                b.run_id == step.run_id
                    && self
                        .steps
                        .get(&b.view.parent_step_id)
                        .is_some_and(|parent| parent.view.step_name == step.view.step_name)
            })
            .max_by_key(|b| b.view.id)
            .map(|b| BatchState {
                id: b.view.id,
                total: b.view.total,
                finished: b.view.finished,
                cancelled: b.view.cancelled,
                open: b.view.status == BatchStatus::Open,
                own: b.view.parent_step_id == step_id,
                output: self
                    .steps
                    .get(&b.view.parent_step_id)
                    .and_then(|parent| parent.view.output.clone()),
            })
    }

    /// The schedule tick `run_id` was started for, if any.
    fn run_tick(&self, run_id: RunId) -> Option<pgbus_runtime::schedule::Tick> {
        self.runs.get(&run_id.0).and_then(|run| run.tick.clone())
    }
}
