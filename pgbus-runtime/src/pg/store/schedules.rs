//! Schedules: their rows, locked, fenced and written as the engine decides;
//! a fire starts its ticks' runs in the transaction that moves the row on.

use crate::pg::tx::Tx;
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;

use super::{PgStore, TX_ATTEMPTS, check_count, parse_stored, retryable};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::{
    Declare, change_schedule, declare_schedule, fire_plan, fired, pause_unreadable,
};
use crate::error::Error;
use crate::pg::start::{PgStart, start_with};
use crate::schedule::{DueSchedule, Fired, ScheduleChange, ScheduleSpec, ScheduleView, Tick};

/// A `schedules` row as read by any of the schedule statements.
fn schedule_of_row(row: &tokio_postgres::Row) -> Result<ScheduleView, Error> {
    Ok(ScheduleView {
        name: row.try_get("name")?,
        workflow: row.try_get("workflow")?,
        expression: row.try_get("expression")?,
        timezone: row.try_get("timezone")?,
        catch_up: row.try_get("catch_up")?,
        input: row.try_get("input")?,
        input_omitted: false,
        origin: parse_stored(&row.try_get::<_, String>("origin")?)?,
        next_tick_at: row.try_get("next_tick_at")?,
        last_tick_at: row.try_get("last_tick_at")?,
        last_run_id: row.try_get::<_, Option<i64>>("last_run_id")?.map(RunId),
        last_fired_at: row.try_get("last_fired_at")?,
        paused_at: row.try_get("paused_at")?,
        paused_by: row.try_get("paused_by")?,
        paused_reason: row.try_get("paused_reason")?,
        ticks_skipped: row.try_get("ticks_skipped")?,
        declared_at: row.try_get("declared_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// What the statement returned it as, with the store's time.
type Locked = (ScheduleView, DateTime<Utc>);

impl PgStore {
    /// The parameters of `insert_schedule.sql` and `update_schedule.sql`.
    fn schedule_params(schedule: &ScheduleView) -> ScheduleParams<'_> {
        ScheduleParams {
            schedule,
            origin: schedule.origin.as_str(),
            last_run_id: schedule.last_run_id.map(|id| id.0),
        }
    }

    async fn lock_schedule(&self, tx: &Tx<'_>, name: &str) -> Result<Option<Locked>, Error> {
        let statement = self.prep.in_tx(tx, &self.sql.lock_schedule).await?;
        let now = self.clock.now();
        statement
            .query_opt(tx, &[&name, &now])
            .await?
            .map(|row| Ok((schedule_of_row(&row)?, row.try_get("now")?)))
            .transpose()
    }

    async fn write_schedule(
        &self,
        tx: &Tx<'_>,
        schedule: &ScheduleView,
        insert: bool,
    ) -> Result<bool, Error> {
        let sql = if insert {
            &self.sql.insert_schedule
        } else {
            &self.sql.update_schedule
        };
        let statement = self.prep.in_tx(tx, sql).await?;
        let params = Self::schedule_params(schedule);
        let written = statement.execute(tx, &params.as_params()).await?;
        if !insert {
            check_count("update_schedule", 1, i64::try_from(written).unwrap_or(0))?;
        }
        Ok(written == 1)
    }

    pub(crate) async fn declare_schedules(
        &self,
        specs: &[ScheduleSpec],
    ) -> Result<Vec<String>, Error> {
        in_tx!(self.pool, |tx| self.declare_in(&tx, specs))
    }

    async fn declare_in(&self, tx: &Tx<'_>, specs: &[ScheduleSpec]) -> Result<Vec<String>, Error> {
        let mut left_alone = Vec::new();
        // Rows locked in name order, whoever declares: no two declarations
        // wait on each other's locks.
        let mut ordered: Vec<&ScheduleSpec> = specs.iter().collect();
        ordered.sort_by(|a, b| a.name.cmp(&b.name));
        for spec in ordered {
            // Twice at most: a worker that inserted the same name meanwhile
            // makes the insert write nothing, and the second round locks its row.
            for _ in 0..2 {
                let locked = self.lock_schedule(tx, &spec.name).await?;
                let now = match &locked {
                    Some((_, now)) => *now,
                    None => self.store_now(tx).await?,
                };
                match declare_schedule(locked.as_ref().map(|(row, _)| row), spec, now) {
                    Declare::Insert(row) => {
                        if self.write_schedule(tx, &row, true).await? {
                            break;
                        }
                    }
                    Declare::Update(row) => {
                        self.write_schedule(tx, &row, false).await?;
                        break;
                    }
                    Declare::Conflict => {
                        left_alone.push(spec.name.clone());
                        break;
                    }
                }
            }
        }
        Ok(left_alone)
    }

    async fn store_now(&self, tx: &Tx<'_>) -> Result<DateTime<Utc>, Error> {
        let statement = self.prep.in_tx(tx, &self.sql.store_now).await?;
        let now = self.clock.now();
        Ok(statement.query_one(tx, &[&now]).await?.try_get("now")?)
    }

    pub(crate) async fn create_schedule(&self, spec: &ScheduleSpec) -> Result<ScheduleView, Error> {
        let mut guarded = self.guarded().await?;
        let created = in_tx!(@on guarded, |tx| async {
            let now = self.store_now(&tx).await?;
            let row = ScheduleView::new(spec, crate::schedule::ScheduleOrigin::Client, now);
            if self.write_schedule(&tx, &row, true).await? {
                Ok(row)
            } else {
                Err(Error::ScheduleExists {
                    name: spec.name.clone(),
                })
            }
        });
        guarded.finish();
        created
    }

    pub(crate) async fn change_schedule(
        &self,
        name: &str,
        change: &ScheduleChange,
    ) -> Result<ScheduleView, Error> {
        let mut guarded = self.guarded().await?;
        let changed = in_tx!(@on guarded, |tx| async {
            let Some((mut row, now)) = self.lock_schedule(&tx, name).await? else {
                return Err(Error::ScheduleNotFound {
                    name: name.to_owned(),
                });
            };
            change_schedule(&mut row, change, now, &self.limits)?;
            self.write_schedule(&tx, &row, false).await?;
            Ok(row)
        });
        guarded.finish();
        changed
    }

    pub(crate) async fn delete_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        let mut guarded = self.guarded().await?;
        let statement = self
            .prep
            .on(&mut guarded, &self.sql.delete_schedule)
            .await?;
        let deleted = statement.query_opt(&*guarded, &[&name]).await;
        guarded.finish();
        match deleted? {
            Some(row) => schedule_of_row(&row),
            None => Err(Error::ScheduleNotFound {
                name: name.to_owned(),
            }),
        }
    }

    pub(crate) async fn list_schedules(
        &self,
        workflow: Option<&str>,
        name: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ScheduleView>, Error> {
        let limit = limit.clamp(0, crate::schedule::MAX_SCHEDULES_LISTED);
        let mut guarded = self.guarded().await?;
        let statement = self.prep.on(&mut guarded, &self.sql.list_schedules).await?;
        let rows = statement
            .query(&*guarded, &[&workflow, &name, &limit])
            .await;
        guarded.finish();
        rows?
            .iter()
            .map(|row| {
                let view = schedule_of_row(row)?;
                Ok(if name.is_none() { view.listed() } else { view })
            })
            .collect()
    }

    pub(crate) async fn due_schedules(
        &self,
        workflows: &[String],
        limit: i64,
    ) -> Result<Vec<DueSchedule>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.due_schedules).await?;
        let now = self.clock.now();
        statement
            .query(&client, &[&workflows, &limit, &now])
            .await?
            .iter()
            .map(|row| {
                Ok(DueSchedule {
                    schedule: schedule_of_row(row)?,
                    now: row.try_get("now")?,
                })
            })
            .collect()
    }

    pub(crate) async fn fire_schedule(
        &self,
        definition: &'static WorkflowDefinition,
        due: &DueSchedule,
        max_ticks: usize,
    ) -> Result<Fired, Error> {
        let Some(expected) = due.schedule.next_tick_at else {
            return Ok(Fired::Lost);
        };
        in_tx!(self.pool, |tx| self.fire_in(
            &tx,
            definition,
            &due.schedule.name,
            expected,
            max_ticks
        ))
    }

    async fn fire_in(
        &self,
        tx: &Tx<'_>,
        definition: &'static WorkflowDefinition,
        name: &str,
        expected: DateTime<Utc>,
        max_ticks: usize,
    ) -> Result<Fired, Error> {
        let statement = self.prep.in_tx(tx, &self.sql.lock_due_schedule).await?;
        let now = self.clock.now();
        let Some(row) = statement.query_opt(tx, &[&name, &expected, &now]).await? else {
            return Ok(Fired::Lost);
        };
        let (mut schedule, now): Locked = (schedule_of_row(&row)?, row.try_get("now")?);
        let plan = match fire_plan(&schedule, now, max_ticks) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(Fired::Lost),
            Err(reason) => {
                pause_unreadable(&mut schedule, &reason, now);
                self.write_schedule(tx, &schedule, false).await?;
                return Ok(Fired::Unreadable(reason));
            }
        };
        let mut runs = Vec::with_capacity(plan.ticks.len());
        for tick in &plan.ticks {
            let tick = Tick {
                schedule: schedule.name.clone(),
                at: *tick,
            };
            let options = crate::start_options::StartOptions::new().key(tick.idempotency_key());
            let args = self.start_args(definition, &schedule.input, &options)?;
            let insert = self.prep.in_tx(tx, &self.sql.start_run).await?;
            let find = self.prep.in_tx(tx, &self.sql.find_run_by_key).await?;
            let (run_id, created) = start_with(
                &mut PgStart {
                    conn: tx,
                    insert,
                    find,
                },
                &args,
            )
            .await?;
            if created {
                let mark = self.prep.in_tx(tx, &self.sql.mark_scheduled_run).await?;
                let marked = mark
                    .execute(tx, &[&run_id.0, &tick.schedule, &tick.at])
                    .await?;
                check_count("mark_scheduled_run", 1, i64::try_from(marked).unwrap_or(0))?;
            }
            runs.push((tick.at, run_id, created));
        }
        fired(&mut schedule, &plan, &runs, now);
        self.write_schedule(tx, &schedule, false).await?;
        Ok(Fired::Applied { plan, runs })
    }
}

/// A schedule row as the 18 parameters of `insert_schedule.sql` and
/// `update_schedule.sql`.
struct ScheduleParams<'a> {
    schedule: &'a ScheduleView,
    origin: &'static str,
    last_run_id: Option<i64>,
}

impl ScheduleParams<'_> {
    fn as_params(&self) -> [&(dyn ToSql + Sync); 18] {
        let s = self.schedule;
        [
            &s.name,
            &s.workflow,
            &s.expression,
            &s.timezone,
            &s.catch_up,
            &s.input,
            &self.origin,
            &s.next_tick_at,
            &s.last_tick_at,
            &self.last_run_id,
            &s.last_fired_at,
            &s.paused_at,
            &s.paused_by,
            &s.paused_reason,
            &s.ticks_skipped,
            &s.declared_at,
            &s.created_at,
            &s.updated_at,
        ]
    }
}
