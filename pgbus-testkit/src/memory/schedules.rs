//! Schedules in memory: the `schedules` rows as a map, changed as the engine
//! decides, fired as `fire_schedule` fires them in Postgres.

use chrono::{DateTime, Utc};
use pgbus_runtime::engine::{
    Declare, change_schedule, declare_schedule, fire_plan, fired, pause_unreadable,
};
use pgbus_runtime::schedule::{
    DueSchedule, Fired, MAX_SCHEDULES_LISTED, ScheduleChange, ScheduleOrigin, ScheduleSpec,
    ScheduleView, Tick,
};
use pgbus_runtime::start_options::StartOptions;
use pgbus_runtime::{Error, WorkflowDefinition};

use super::Rows;

impl Rows {
    /// As `declare_schedules` in Postgres: the names left alone.
    pub(crate) fn declare_schedules(&mut self, specs: &[ScheduleSpec]) -> Vec<String> {
        let now = self.now;
        let mut left_alone = Vec::new();
        for spec in specs {
            match declare_schedule(self.schedules.get(&spec.name), spec, now) {
                Declare::Insert(row) | Declare::Update(row) => {
                    self.schedules.insert(row.name.clone(), row);
                }
                Declare::Conflict => left_alone.push(spec.name.clone()),
            }
        }
        left_alone
    }

    /// As `create_schedule`.
    pub(crate) fn create_schedule(&mut self, spec: &ScheduleSpec) -> Result<ScheduleView, Error> {
        if self.schedules.contains_key(&spec.name) {
            return Err(Error::ScheduleExists {
                name: spec.name.clone(),
            });
        }
        let row = ScheduleView::new(spec, ScheduleOrigin::Client, self.now);
        self.schedules.insert(row.name.clone(), row.clone());
        Ok(row)
    }

    /// As `change_schedule`: the row after, unchanged on an error.
    pub(crate) fn change_schedule(
        &mut self,
        name: &str,
        change: &ScheduleChange,
    ) -> Result<ScheduleView, Error> {
        let Some(stored) = self.schedules.get(name) else {
            return Err(Error::ScheduleNotFound {
                name: name.to_owned(),
            });
        };
        let mut row = stored.clone();
        change_schedule(&mut row, change, self.now, &self.limits)?;
        self.schedules.insert(row.name.clone(), row.clone());
        Ok(row)
    }

    /// As `delete_schedule`.
    pub(crate) fn delete_schedule(&mut self, name: &str) -> Result<ScheduleView, Error> {
        self.schedules
            .remove(name)
            .ok_or_else(|| Error::ScheduleNotFound {
                name: name.to_owned(),
            })
    }

    /// As `list_schedules.sql`.
    pub(crate) fn list_schedules(
        &self,
        workflow: Option<&str>,
        name: Option<&str>,
        limit: i64,
    ) -> Vec<ScheduleView> {
        let limit = usize::try_from(limit.clamp(0, MAX_SCHEDULES_LISTED)).unwrap_or(0);
        self.schedules
            .values()
            .filter(|row| workflow.is_none_or(|w| row.workflow == w))
            .filter(|row| name.is_none_or(|n| row.name == n))
            .take(limit)
            .map(|row| {
                if name.is_none() {
                    row.clone().listed()
                } else {
                    row.clone()
                }
            })
            .collect()
    }

    /// The earliest next tick of the unpaused schedules of `workflows`.
    pub(crate) fn next_schedule_tick(&self, workflows: &[String]) -> Option<DateTime<Utc>> {
        self.schedules
            .values()
            .filter(|row| !row.is_paused() && workflows.contains(&row.workflow))
            .filter_map(|row| row.next_tick_at)
            .min()
    }

    /// As `due_schedules.sql`.
    pub(crate) fn due_schedules(&self, workflows: &[String], limit: i64) -> Vec<DueSchedule> {
        let now = self.now;
        let mut due: Vec<&ScheduleView> = self
            .schedules
            .values()
            .filter(|row| !row.is_paused() && row.next_tick_at.is_some_and(|at| at <= now))
            .filter(|row| workflows.contains(&row.workflow))
            .collect();
        due.sort_by(|a, b| (a.next_tick_at, &a.name).cmp(&(b.next_tick_at, &b.name)));
        due.into_iter()
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|row| DueSchedule {
                schedule: row.clone(),
                now,
            })
            .collect()
    }

    /// As `fire_schedule` in Postgres: fenced on the row being unpaused and
    /// still at `due`'s tick; each tick's run started with its key.
    pub(crate) fn fire_schedule(
        &mut self,
        definition: &'static WorkflowDefinition,
        due: &DueSchedule,
        max_ticks: usize,
    ) -> Result<Fired, Error> {
        let now = self.now;
        let Some(stored) = self.schedules.get(&due.schedule.name) else {
            return Ok(Fired::Lost);
        };
        if stored.is_paused()
            || due.schedule.next_tick_at.is_none()
            || stored.next_tick_at != due.schedule.next_tick_at
        {
            return Ok(Fired::Lost);
        }
        let mut row = stored.clone();
        let plan = match fire_plan(&row, now, max_ticks) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(Fired::Lost),
            Err(reason) => {
                pause_unreadable(&mut row, &reason, now);
                self.schedules.insert(row.name.clone(), row);
                return Ok(Fired::Unreadable(reason));
            }
        };
        let mut runs = Vec::with_capacity(plan.ticks.len());
        for at in &plan.ticks {
            let tick = Tick {
                schedule: row.name.clone(),
                at: *at,
            };
            let options = StartOptions::new().key(tick.idempotency_key());
            let (run_id, created) = self.start_run(definition, row.input.clone(), &options)?;
            if created && let Some(run) = self.runs.get_mut(&run_id.0) {
                run.tick = Some(tick);
            }
            runs.push((*at, run_id, created));
        }
        fired(&mut row, &plan, &runs, now);
        self.schedules.insert(row.name.clone(), row);
        Ok(Fired::Applied { plan, runs })
    }
}
