//! The memory store under the store contract: each verb the `Rows` method
//! that carries it, under one lock, so each is as atomic as the Postgres
//! store's transaction.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use pgbus_runtime::client::checked_reason;
use pgbus_runtime::engine::{Action, AttemptResult, RunStatus, SignalCheck};
use pgbus_runtime::schedule::{DueSchedule, Fired, ScheduleChange, ScheduleSpec, ScheduleView};
use pgbus_runtime::store::{Claim, Claimer, Ended, Handoff, NewRun, Registration, Stalled, Store};
use pgbus_runtime::{
    DeadlineAction, Error, Limits, Overview, RegisteredWorkflow, ResultView, RunCount, RunFilter,
    RunId, RunRead, RunSummary, RunView, SignalId, StartOptions, WorkflowDefinition,
};
use serde_json::Value;

use super::Rows;

/// The memory store: runs, steps, events, signals and batches in maps on a
/// virtual clock, changed by the same engine plans as the Postgres store.
/// Implements [`Store`]; a `TestEnv` drives one, and
/// [`TestEnv::store`](crate::TestEnv::store) hands it out (for a suite that
/// runs the same scenario against both stores).
#[derive(Clone, Debug)]
pub struct MemoryStore {
    rows: Arc<Mutex<Rows>>,
}

impl MemoryStore {
    /// An empty store whose clock reads `now`.
    #[must_use]
    pub fn starting_at(now: DateTime<Utc>) -> Self {
        Self {
            rows: Arc::new(Mutex::new(Rows::new(now))),
        }
    }

    /// The virtual time.
    #[must_use]
    pub fn now(&self) -> DateTime<Utc> {
        self.rows().now
    }

    /// Moves the virtual clock to `now` (never back: an earlier time is
    /// ignored).
    pub fn set_now(&self, now: DateTime<Utc>) {
        let mut rows = self.rows();
        if now > rows.now {
            rows.now = now;
        }
    }

    /// The sizes of inputs and signal payloads accepted.
    pub fn set_limits(&self, limits: Limits) {
        self.rows().limits = limits;
    }

    /// Records that worker `worker_id` died now: its heartbeat stopped at the
    /// current virtual time, so the sweep takes the attempts it holds (or
    /// claims later) for lost (`worker_lost`) once it has been silent for
    /// longer than the lost-worker threshold. The Postgres store learns the
    /// same from a worker row whose heartbeat stopped; the memory store keeps
    /// no rows of live workers, and takes any worker it was not told died for
    /// alive. [`TestEnv::crash_next`](crate::TestEnv::crash_next) tells it of
    /// the workers it kills; a suite that drives the store through the store
    /// contract alone (claiming for a worker of its own that then dies) tells
    /// it here. A worker that died already keeps its first time.
    pub fn worker_died(&self, worker_id: &str) {
        self.rows().worker_died(worker_id);
    }

    /// What the registry holds for worker `worker_id`: each workflow it
    /// registered, by name, with the digests of the definition it runs and
    /// the per-deployment overrides in force, as `Client::workers` reads a
    /// worker's from Postgres; `None` when it never registered.
    #[must_use]
    pub fn registered(&self, worker_id: &str) -> Option<Vec<RegisteredWorkflow>> {
        let rows = self.rows();
        let mut registered: Vec<RegisteredWorkflow> = rows
            .registered(worker_id)?
            .iter()
            .map(|definition| RegisteredWorkflow::of(definition))
            .collect();
        registered.sort_by(|a, b| a.workflow.cmp(&b.workflow));
        Some(registered)
    }

    pub(crate) fn rows(&self) -> MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    async fn start_run(
        &self,
        definition: &'static WorkflowDefinition,
        input: &Value,
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        self.rows().start_run(definition, input.clone(), options)
    }

    async fn start_many(
        &self,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        self.rows().start_many(definition, runs)
    }

    async fn claim(&self, claimer: &Claimer<'_>, limit: usize) -> Result<Vec<Claim>, Error> {
        let mut rows = self.rows();
        Ok(std::iter::from_fn(|| rows.claim(claimer))
            .take(limit)
            .collect())
    }

    async fn end_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        claim: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        retrying: bool,
        handoff: Option<Handoff<'_>>,
    ) -> Result<Ended, Error> {
        let mut rows = self.rows();
        let ended = rows.end_attempt(definition, claim, result, worker_id, None);
        // A retry never hands on (nothing is lost in memory, but the contract
        // is the Postgres store's).
        Ok(match (ended, handoff) {
            (Ended::Applied(plan), Some(handoff)) if !retrying => {
                rows.hand_off(claim, result, worker_id, plan, handoff, definition)
            }
            (ended, _) => ended,
        })
    }

    async fn stalled(&self, lost_ms: i64, limit: i64) -> Result<Vec<Stalled>, Error> {
        Ok(self.rows().stalled(lost_ms, limit))
    }

    async fn sweep_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        stalled: &Stalled,
        result: &AttemptResult,
    ) -> Result<Ended, Error> {
        Ok(self.rows().sweep_attempt(definition, stalled, result))
    }

    async fn register_worker(&self, registration: &Registration<'_>) -> Result<(), Error> {
        self.rows().register_worker(
            registration.worker_id,
            registration.definitions,
            registration.queues,
            registration.queue_limits,
        );
        Ok(())
    }

    async fn undefined_steps(
        &self,
        grace_ms: i64,
        lost_ms: i64,
        limit: i64,
    ) -> Result<Vec<Claim>, Error> {
        Ok(self.rows().undefined_steps(grace_ms, lost_ms, limit))
    }

    async fn pause_undefined(
        &self,
        step: &Claim,
        result: &AttemptResult,
        grace_ms: i64,
        lost_ms: i64,
    ) -> Result<Ended, Error> {
        Ok(self.rows().pause_undefined(step, result, grace_ms, lost_ms))
    }

    async fn resolve_batches(&self, limit: i64) -> Result<u64, Error> {
        Ok(self.rows().resolve_batches(limit))
    }

    async fn delete_expired_runs(&self, retention_ms: i64, limit: i64) -> Result<u64, Error> {
        Ok(self.rows().delete_expired_runs(retention_ms, limit))
    }

    async fn expire_deadlines(&self, limit: i64) -> Result<Vec<(RunId, DeadlineAction)>, Error> {
        self.rows().expire_deadlines(limit)
    }

    async fn signal(
        &self,
        run_id: RunId,
        name: &str,
        payload: &Value,
        check: SignalCheck,
    ) -> Result<SignalId, Error> {
        let mut rows = self.rows();
        rows.limits.check_signal(name, payload)?;
        rows.signal(run_id, name, payload.clone(), check)
    }

    async fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let reason = checked_reason(actor, reason)?;
        self.rows().act(run_id, action, actor, &reason)
    }

    async fn run(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        self.rows().run(run_id, read)
    }

    async fn run_result(&self, run_id: RunId) -> Result<ResultView, Error> {
        self.rows().run_result(run_id)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        self.rows().list_runs(filter)
    }

    async fn workflows(&self) -> Result<Vec<String>, Error> {
        Ok(self.rows().workflows())
    }

    async fn count_runs(&self, filter: &RunFilter, cap: u32) -> Result<RunCount, Error> {
        self.rows().count_runs(filter, cap)
    }

    async fn overview(&self) -> Result<Overview, Error> {
        Ok(self.rows().overview())
    }

    async fn limits(&self) -> Result<pgbus_runtime::LimitsNow, Error> {
        Ok(self.rows().limits())
    }

    async fn newest_activity(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
        Ok(self.rows().newest_activity())
    }

    async fn declare_schedules(&self, specs: &[ScheduleSpec]) -> Result<Vec<String>, Error> {
        Ok(self.rows().declare_schedules(specs))
    }

    async fn create_schedule(&self, spec: &ScheduleSpec) -> Result<ScheduleView, Error> {
        self.rows().create_schedule(spec)
    }

    async fn change_schedule(
        &self,
        name: &str,
        change: &ScheduleChange,
    ) -> Result<ScheduleView, Error> {
        self.rows().change_schedule(name, change)
    }

    async fn delete_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.rows().delete_schedule(name)
    }

    async fn list_schedules(
        &self,
        workflow: Option<&str>,
        name: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ScheduleView>, Error> {
        Ok(self.rows().list_schedules(workflow, name, limit))
    }

    async fn due_schedules(
        &self,
        workflows: &[String],
        limit: i64,
    ) -> Result<Vec<DueSchedule>, Error> {
        Ok(self.rows().due_schedules(workflows, limit))
    }

    async fn fire_schedule(
        &self,
        definition: &'static WorkflowDefinition,
        due: &DueSchedule,
        max_ticks: usize,
    ) -> Result<Fired, Error> {
        self.rows().fire_schedule(definition, due, max_ticks)
    }
}
