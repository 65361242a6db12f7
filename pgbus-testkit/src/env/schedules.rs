//! Schedules in the environment: managed as the client manages them, fired as
//! the virtual clock moves (as a worker that never stops would fire them), or
//! not at all during a simulated outage.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use pgbus_runtime::schedule::{
    Schedule, ScheduleChange, ScheduleSpec, ScheduleUpdate, ScheduleView,
};
use pgbus_runtime::store::{FireReport, FireSettings, Store as _, fire_schedules};
use pgbus_runtime::{Error, Workflow};

use super::TestEnv;

/// How many ticks one [`TestEnv::advance`] fires at most on its way; past it
/// the clock jumps to its end, and the ticks left count as missed (the
/// catch-up policy decides at the next fire).
pub const MAX_TICKS_PER_ADVANCE: usize = 10_000;

impl TestEnv {
    /// Writes the schedules the registered workflows declare in code, as a
    /// worker does when it registers.
    pub(super) fn declare_schedules(&self) {
        // An input that does not serialize is reported by `fire_schedules`.
        if let Ok(specs) = self.runner.declared_schedules()
            && !specs.is_empty()
        {
            self.store().rows().declare_schedules(&specs);
        }
    }

    /// Fires the due ticks of the schedules of the registered workflows at the
    /// current virtual time, as a worker's fire pass does
    /// (`Worker::fire_schedules`): each tick starts one run (its
    /// `StepCx::tick` says which); ticks found more than 60 s late were
    /// missed, and their schedule's catch-up policy decides. No bound but
    /// [`pgbus_runtime::schedule::MAX_TICKS_PER_PASS`] per schedule.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] when a workflow's declared schedule cannot
    /// be written (its default input does not serialize).
    pub fn fire_schedules(&self) -> Result<FireReport, Error> {
        self.runner.declared_schedules()?;
        let workflows = self.runner.workflows().to_vec();
        let settings = FireSettings {
            schedules: i64::MAX,
            ..FireSettings::default()
        };
        let fire = fire_schedules(
            self.store(),
            &workflows,
            |workflow| self.runner.definition(workflow),
            &settings,
        );
        // The memory store neither waits nor fails but as the engine says.
        fire.now_or_never().unwrap_or(Ok(FireReport::default()))
    }

    /// Moves the clock forward by `by` as if no worker ran meanwhile (a
    /// deploy, an outage): no schedule fires on the way. The next
    /// [`TestEnv::fire_schedules`] or [`TestEnv::advance`] finds the ticks
    /// that fell in it, missed once more than 60 s late.
    pub fn outage(&self, by: Duration) {
        let mut rows = self.store().rows();
        rows.now = later(rows.now, by);
    }

    /// Moves the clock to `until`, firing each schedule tick on the way at its
    /// own time, at most [`MAX_TICKS_PER_ADVANCE`] (then it jumps), and
    /// acting on the deadlines passed before each tick and at `until`.
    pub(super) fn advance_firing(&self, until: DateTime<Utc>) {
        let workflows = self.runner.workflows().to_vec();
        let mut fired = 0;
        while fired < MAX_TICKS_PER_ADVANCE {
            let next = {
                let rows = self.store().rows();
                rows.next_schedule_tick(&workflows)
            };
            let Some(next) = next.filter(|next| *next <= until) else {
                break;
            };
            {
                let mut rows = self.store().rows();
                rows.now = rows.now.max(next);
            }
            self.expire_deadlines();
            match self.fire_schedules() {
                Ok(report) if report.schedules_fired > 0 => {
                    fired += report.runs_started.max(1);
                }
                // Nothing fired at a due tick: a schedule no registered
                // workflow fires, or one that cannot (its input); stop here.
                _ => break,
            }
        }
        {
            let mut rows = self.store().rows();
            rows.now = rows.now.max(until);
        }
        self.expire_deadlines();
    }

    /// Creates a schedule, as `Client::create_schedule`.
    ///
    /// # Errors
    /// As `Client::create_schedule`.
    pub fn create_schedule<W: Workflow>(
        &self,
        name: &str,
        schedule: &Schedule,
        input: &W::Input,
    ) -> Result<ScheduleView, Error> {
        let input = serde_json::to_value(input)?;
        let spec = ScheduleSpec::new(name, W::DEFINITION.name, schedule, input, &self.limits)?;
        self.store().rows().create_schedule(&spec)
    }

    /// Updates a schedule, as `Client::update_schedule`.
    ///
    /// # Errors
    /// As `Client::update_schedule`.
    pub fn update_schedule(
        &self,
        name: &str,
        update: ScheduleUpdate,
    ) -> Result<ScheduleView, Error> {
        self.change(name, &ScheduleChange::Update(update))
    }

    /// Pauses a schedule, as `Client::pause_schedule`.
    ///
    /// # Errors
    /// As `Client::pause_schedule`.
    pub fn pause_schedule(
        &self,
        name: &str,
        actor: &str,
        reason: &str,
    ) -> Result<ScheduleView, Error> {
        let change = ScheduleChange::Pause {
            actor: actor.to_owned(),
            reason: reason.to_owned(),
        };
        self.change(name, &change)
    }

    /// Resumes a schedule from its first tick after now, as
    /// `Client::resume_schedule`.
    ///
    /// # Errors
    /// As `Client::resume_schedule`.
    pub fn resume_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.change(name, &ScheduleChange::Resume)
    }

    /// Deletes a schedule, as `Client::delete_schedule`.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`].
    pub fn delete_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.store().rows().delete_schedule(name)
    }

    /// A schedule, as `Client::schedule`.
    ///
    /// # Errors
    /// [`Error::ScheduleNotFound`].
    pub fn schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.store()
            .list_schedules(None, Some(name), 1)
            .now_or_never()
            .unwrap_or(Ok(Vec::new()))?
            .pop()
            .ok_or_else(|| Error::ScheduleNotFound {
                name: name.to_owned(),
            })
    }

    /// Every schedule, by name.
    #[must_use]
    pub fn list_schedules(&self) -> Vec<ScheduleView> {
        self.store().rows().list_schedules(
            None,
            None,
            pgbus_runtime::schedule::MAX_SCHEDULES_LISTED,
        )
    }

    fn change(&self, name: &str, change: &ScheduleChange) -> Result<ScheduleView, Error> {
        self.store().rows().change_schedule(name, change)
    }
}

/// `now` plus `by`, or the last time the clock can show.
pub(super) fn later(now: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
    now.checked_add_signed(by)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
