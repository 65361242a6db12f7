//! Schedules managed at run time: create, update, pause, resume, delete, read.

use serde_json::Value;
use tracing::instrument;

use super::Client;
use crate::error::Error;
use crate::schedule::{Schedule, ScheduleChange, ScheduleSpec, ScheduleUpdate, ScheduleView};
use crate::workflow::Workflow;

impl Client {
    /// Creates schedule `name`: every tick of `schedule` starts a run of `W`
    /// with `input` (the first tick being the first after now, on the
    /// database's clock), fired by the workers that registered `W` (see
    /// [`crate::schedule`]). The run's [`StepCx::tick`](crate::StepCx::tick)
    /// says which tick. As Temporal's `ScheduleClient::create`.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] naming the field (`name`, `schedule`,
    /// `timezone`, `catch_up`, `input`), [`Error::ScheduleExists`],
    /// [`Error::Json`] when `input` does not serialize, and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name, pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn create_schedule<W: Workflow>(
        &self,
        name: &str,
        schedule: &Schedule,
        input: &W::Input,
    ) -> Result<ScheduleView, Error> {
        let input = serde_json::to_value(input)?;
        self.create_schedule_of(W::DEFINITION.name, name, schedule, input)
            .await
    }

    /// As [`Client::create_schedule`], for a workflow named at run time with
    /// its input as JSON (what `pgbus schedules create` calls): the input is
    /// checked against the workflow's input type only when a run starts (a
    /// run whose input does not deserialize fails its first step with
    /// [`BadInput`](crate::BadInput)).
    ///
    /// # Errors
    /// Those of [`Client::create_schedule`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name, pgbus.workflow = workflow), err(level = "debug"))]
    pub async fn create_schedule_of(
        &self,
        workflow: &str,
        name: &str,
        schedule: &Schedule,
        input: Value,
    ) -> Result<ScheduleView, Error> {
        let spec = ScheduleSpec::new(name, workflow, schedule, input, &self.store.limits)?;
        self.store.create_schedule(&spec).await
    }

    /// Changes the fields `update` gives of schedule `name`; its next tick is
    /// computed again from now. Refused for a schedule declared in code
    /// (change the code, or pause it).
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`], [`Error::ScheduleDeclaredInCode`],
    /// [`Error::InvalidSchedule`] naming the field, and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name), err(level = "debug"))]
    pub async fn update_schedule(
        &self,
        name: &str,
        update: ScheduleUpdate,
    ) -> Result<ScheduleView, Error> {
        self.store
            .change_schedule(name, &ScheduleChange::Update(update))
            .await
    }

    /// Pauses schedule `name`: no tick fires until it is resumed, and ticks
    /// meanwhile are never caught up. A pause of a schedule declared in code
    /// survives redeploys. `actor` and `reason` are kept on the row.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`], [`Error::IllegalScheduleChange`] when it
    /// is paused already, [`Error::InvalidActor`], [`Error::InvalidReason`],
    /// and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name, pgbus.actor = actor), err(level = "debug"))]
    pub async fn pause_schedule(
        &self,
        name: &str,
        actor: &str,
        reason: &str,
    ) -> Result<ScheduleView, Error> {
        let change = ScheduleChange::Pause {
            actor: actor.to_owned(),
            reason: reason.to_owned(),
        };
        self.store.change_schedule(name, &change).await
    }

    /// Resumes schedule `name` from the first tick after now.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`], [`Error::IllegalScheduleChange`] when it
    /// is not paused, [`Error::InvalidSchedule`] when its stored expression or
    /// zone does not read, and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name), err(level = "debug"))]
    pub async fn resume_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.store
            .change_schedule(name, &ScheduleChange::Resume)
            .await
    }

    /// Deletes schedule `name`; the runs it started stay. A schedule declared
    /// in code is written again by the next worker that registers its
    /// workflow: remove it from the code first (or pause it). Returns the row
    /// deleted.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`], and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.schedule = name), err(level = "debug"))]
    pub async fn delete_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.store.delete_schedule(name).await
    }

    /// Schedule `name`.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`], and database errors.
    pub async fn schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.store
            .list_schedules(None, Some(name), 1)
            .await?
            .pop()
            .ok_or_else(|| Error::ScheduleNotFound {
                name: name.to_owned(),
            })
    }

    /// Schedules by name, those of `workflow` or all, at most `limit` (at
    /// most [`MAX_SCHEDULES_LISTED`](crate::schedule::MAX_SCHEDULES_LISTED)).
    ///
    /// # Errors
    /// Database errors.
    pub async fn list_schedules(
        &self,
        workflow: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduleView>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.store.list_schedules(workflow, None, limit).await
    }
}
