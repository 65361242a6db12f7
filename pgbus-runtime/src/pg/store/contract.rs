//! The Postgres store under the store contract: each verb the statement or
//! transaction of `pg/store.rs` (and the client's reads) that carries it.

use serde_json::Value;

use super::PgStore;
use crate::client::{Client, checked_reason};
use crate::context::{RunId, SignalId};
use crate::definition::{DeadlineAction, WorkflowDefinition};
use crate::engine::{Action, AttemptResult, RunStatus, SignalCheck};
use crate::error::Error;
use crate::schedule::{DueSchedule, Fired, ScheduleChange, ScheduleSpec, ScheduleView};
use crate::start_options::{NewRun, StartOptions};
use crate::store::{Claim, Claimer, Ended, Handoff, Registration, Stalled, Store};
use crate::view::{
    LimitsNow, Overview, ResultView, RunCount, RunFilter, RunRead, RunSummary, RunView,
};

impl Store for PgStore {
    async fn start_run(
        &self,
        definition: &'static WorkflowDefinition,
        input: &Value,
        options: &StartOptions,
    ) -> Result<(RunId, bool), Error> {
        Self::start_run(self, definition, input, options).await
    }

    async fn start_many(
        &self,
        definition: &'static WorkflowDefinition,
        runs: &[NewRun],
    ) -> Result<Vec<(RunId, bool)>, Error> {
        Self::start_many(self, definition, runs).await
    }

    async fn claim(&self, claimer: &Claimer<'_>, limit: usize) -> Result<Vec<Claim>, Error> {
        Self::claim(
            self,
            claimer.queues,
            claimer.registered,
            i64::try_from(limit).unwrap_or(i64::MAX),
            claimer.worker_id,
            claimer.stall_threshold_ms,
        )
        .await
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
        Self::end_attempt(
            self, definition, claim, worker_id, result, retrying, handoff,
        )
        .await
    }

    async fn stalled(&self, lost_ms: i64, limit: i64) -> Result<Vec<Stalled>, Error> {
        Ok(Self::stalled(self, lost_ms, limit)
            .await?
            .into_iter()
            .map(|(claim, worker_id, detection)| Stalled {
                claim,
                worker_id,
                detection,
            })
            .collect())
    }

    async fn sweep_attempt(
        &self,
        definition: &'static WorkflowDefinition,
        stalled: &Stalled,
        result: &AttemptResult,
    ) -> Result<Ended, Error> {
        Self::sweep_attempt(
            self,
            definition,
            &stalled.claim,
            &stalled.worker_id,
            result,
            &stalled.detection,
        )
        .await
    }

    async fn register_worker(&self, registration: &Registration<'_>) -> Result<(), Error> {
        Self::register_worker(self, registration).await
    }

    async fn undefined_steps(
        &self,
        grace_ms: i64,
        lost_ms: i64,
        limit: i64,
    ) -> Result<Vec<Claim>, Error> {
        Self::undefined_steps(self, grace_ms, lost_ms, limit).await
    }

    async fn pause_undefined(
        &self,
        step: &Claim,
        result: &AttemptResult,
        grace_ms: i64,
        lost_ms: i64,
    ) -> Result<Ended, Error> {
        Self::pause_undefined(self, step, result, grace_ms, lost_ms).await
    }

    async fn resolve_batches(&self, limit: i64) -> Result<u64, Error> {
        Self::resolve_batches(self, limit).await
    }

    async fn delete_expired_runs(&self, retention_ms: i64, limit: i64) -> Result<u64, Error> {
        Self::delete_expired_runs(self, retention_ms, limit).await
    }

    async fn expire_deadlines(&self, limit: i64) -> Result<Vec<(RunId, DeadlineAction)>, Error> {
        Self::expire_deadlines(self, limit).await
    }

    async fn signal(
        &self,
        run_id: RunId,
        name: &str,
        payload: &Value,
        check: SignalCheck,
    ) -> Result<SignalId, Error> {
        self.limits.check_signal(name, payload)?;
        Self::signal(self, run_id, name, payload, check).await
    }

    async fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let reason = checked_reason(actor, reason)?;
        Self::act(self, run_id, action, actor, &reason).await
    }

    async fn run(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        Client::new(self.clone(), None).run_with(run_id, read).await
    }

    async fn run_result(&self, run_id: RunId) -> Result<ResultView, Error> {
        Self::run_result(self, run_id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        Client::new(self.clone(), None).list_runs(filter).await
    }

    async fn workflows(&self) -> Result<Vec<String>, Error> {
        Client::new(self.clone(), None).workflows().await
    }

    async fn count_runs(&self, filter: &RunFilter, cap: u32) -> Result<RunCount, Error> {
        Client::new(self.clone(), None)
            .count_runs(filter, cap)
            .await
    }

    async fn overview(&self) -> Result<Overview, Error> {
        Client::new(self.clone(), None).overview().await
    }

    async fn limits(&self) -> Result<LimitsNow, Error> {
        Client::new(self.clone(), None).limits().await
    }

    async fn newest_activity(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
        Client::new(self.clone(), None).newest_activity().await
    }

    async fn declare_schedules(&self, specs: &[ScheduleSpec]) -> Result<Vec<String>, Error> {
        Self::declare_schedules(self, specs).await
    }

    async fn create_schedule(&self, spec: &ScheduleSpec) -> Result<ScheduleView, Error> {
        Self::create_schedule(self, spec).await
    }

    async fn change_schedule(
        &self,
        name: &str,
        change: &ScheduleChange,
    ) -> Result<ScheduleView, Error> {
        Self::change_schedule(self, name, change).await
    }

    async fn delete_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        Self::delete_schedule(self, name).await
    }

    async fn list_schedules(
        &self,
        workflow: Option<&str>,
        name: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ScheduleView>, Error> {
        Self::list_schedules(self, workflow, name, limit).await
    }

    async fn due_schedules(
        &self,
        workflows: &[String],
        limit: i64,
    ) -> Result<Vec<DueSchedule>, Error> {
        Self::due_schedules(self, workflows, limit).await
    }

    async fn fire_schedule(
        &self,
        definition: &'static WorkflowDefinition,
        due: &DueSchedule,
        max_ticks: usize,
    ) -> Result<Fired, Error> {
        Self::fire_schedule(self, definition, due, max_ticks).await
    }
}
