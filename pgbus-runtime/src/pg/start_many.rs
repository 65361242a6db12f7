//! Starting many runs at once: `start_many.sql` writes every run of the call
//! in one statement (arrays bound as parameters, `unnest`ed), and
//! `find_runs_by_keys.sql` reads back, in one more, the runs of keys that
//! were taken before. Two statements at most, whatever the count, on any
//! connection (a transaction of our pool, a caller's tokio-postgres client or
//! transaction, a caller's sqlx connection): the same two statements and the
//! same mapping back to the call's order on each.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::start::StartError;
use super::statement::{Conn, Prepared};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::{BulkStart, RunDeadline, RunOverrides};
use crate::error::Error;
use crate::start_options::NewRun;

/// Where a start of the call gets its run.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// From row `n` (0-based) of those sent.
    Row(usize),
    /// From the earlier start at this index of the call.
    SameAs(usize),
}

/// The parameters of `start_many.sql` for one call, in `$n` order, and how
/// each start of the call maps onto the rows sent.
pub(crate) struct BulkArgs<'a> {
    workflow: &'static str,
    digest: &'static str,
    options_digest: &'static str,
    step_name: String,
    timeout_ms: Option<i64>,
    now: Option<DateTime<Utc>>,
    channel: String,
    step_names: Vec<String>,
    plans: Vec<Value>,
    inputs: Vec<&'a Value>,
    keys: Vec<Option<&'a str>>,
    queues: Vec<String>,
    priorities: Vec<i16>,
    not_before: Vec<Option<DateTime<Utc>>>,
    delay_ms: Vec<i64>,
    queue_overrides: Vec<Option<String>>,
    priority_overrides: Vec<Option<i16>>,
    plan_index: Vec<i32>,
    concurrency_keys: Vec<Option<&'a str>>,
    /// Each run's deadline in the parts `start_many.sql` computes it from
    /// ([`RunDeadline::sql_parts`]), and what it does.
    deadline_fixed: Vec<Option<DateTime<Utc>>>,
    deadline_from: Vec<Option<DateTime<Utc>>>,
    deadline_ms: Vec<Option<i64>>,
    on_deadline: Vec<Option<&'static str>>,
    slots: Vec<Slot>,
}

impl<'a> BulkArgs<'a> {
    /// The parameters of the bulk start `planned` decided for `runs`
    /// (one plan per run, in call order).
    ///
    /// # Errors
    /// [`Error::Json`] if a step plan does not serialize.
    pub(crate) fn new(
        definition: &'static WorkflowDefinition,
        runs: &'a [NewRun],
        planned: Vec<BulkStart>,
        now: Option<DateTime<Utc>>,
        channel: String,
    ) -> Result<Self, Error> {
        let mut args = Self {
            workflow: definition.name,
            digest: definition.digest,
            options_digest: definition.options_digest,
            step_name: String::new(),
            timeout_ms: None,
            now,
            channel,
            step_names: Vec::new(),
            plans: Vec::new(),
            inputs: Vec::with_capacity(runs.len()),
            keys: Vec::with_capacity(runs.len()),
            queues: Vec::with_capacity(runs.len()),
            priorities: Vec::with_capacity(runs.len()),
            not_before: Vec::with_capacity(runs.len()),
            delay_ms: Vec::with_capacity(runs.len()),
            queue_overrides: Vec::with_capacity(runs.len()),
            priority_overrides: Vec::with_capacity(runs.len()),
            plan_index: Vec::with_capacity(runs.len()),
            concurrency_keys: Vec::with_capacity(runs.len()),
            deadline_fixed: Vec::with_capacity(runs.len()),
            deadline_from: Vec::with_capacity(runs.len()),
            deadline_ms: Vec::with_capacity(runs.len()),
            on_deadline: Vec::with_capacity(runs.len()),
            slots: Vec::with_capacity(runs.len()),
        };
        // One step plan per distinct pair of overrides, not one per run.
        let mut plan_of: HashMap<RunOverrides, i32> = HashMap::new();
        for (run, planned) in runs.iter().zip(planned) {
            let plan = match planned {
                BulkStart::SameAs(index) => {
                    args.slots.push(Slot::SameAs(index));
                    continue;
                }
                BulkStart::Own(plan) => *plan,
            };
            args.slots.push(Slot::Row(args.inputs.len()));
            let index = match plan_of.get(&plan.overrides) {
                Some(&index) => index,
                None => {
                    args.plans.push(serde_json::to_value(&plan.step_plan)?);
                    let index = i32::try_from(args.plans.len()).unwrap_or(i32::MAX);
                    plan_of.insert(plan.overrides.clone(), index);
                    index
                }
            };
            args.plan_index.push(index);
            // The same for every run of the definition.
            args.step_name = plan.first.step_name;
            args.timeout_ms = plan.first.timeout_ms;
            args.step_names = plan.step_names;
            args.inputs.push(&run.input);
            args.keys.push(run.options.idempotency_key());
            args.queues.push(plan.first.queue);
            args.priorities.push(plan.first.priority);
            args.not_before.push(plan.due.not_before);
            args.delay_ms
                .push(i64::try_from(plan.due.delay_ms).unwrap_or(i64::MAX));
            args.queue_overrides.push(plan.overrides.queue);
            args.priority_overrides.push(plan.overrides.priority);
            args.concurrency_keys
                .push(run.options.run_concurrency_key());
            let (fixed, from, ms) = RunDeadline::sql_parts(plan.deadline);
            args.deadline_fixed.push(fixed);
            args.deadline_from.push(from);
            args.deadline_ms.push(ms);
            args.on_deadline
                .push(plan.deadline.map(|_| plan.on_deadline.as_str()));
        }
        Ok(args)
    }

    /// The parameters as tokio-postgres takes them.
    fn params(&self) -> [&(dyn ToSql + Sync); 23] {
        [
            &self.workflow,
            &self.digest,
            &self.options_digest,
            &self.step_name,
            &self.timeout_ms,
            &self.now,
            &self.channel,
            &self.step_names,
            &self.plans,
            &self.inputs,
            &self.keys,
            &self.queues,
            &self.priorities,
            &self.not_before,
            &self.delay_ms,
            &self.queue_overrides,
            &self.priority_overrides,
            &self.plan_index,
            &self.concurrency_keys,
            &self.deadline_fixed,
            &self.deadline_from,
            &self.deadline_ms,
            &self.on_deadline,
        ]
    }

    /// Whether any run sent has a key.
    fn keyed(&self) -> bool {
        self.keys.iter().any(Option::is_some)
    }
}

/// What `start_many.sql` returned: for each run sent, in order, its id
/// (`None` when its key was taken), and the counts of step and event rows
/// written (`0, 0` when no row came back).
pub(crate) struct Written {
    ids: Vec<Option<i64>>,
    steps: i64,
    events: i64,
}

/// A connection a bulk start runs on: its two statements, sent on it.
pub(crate) trait BulkConn {
    /// Runs `start_many.sql`. A serialization failure comes back as
    /// [`StartError::Serialization`].
    async fn insert(&mut self, args: &BulkArgs<'_>) -> Result<Written, StartError>;
    /// Runs `find_runs_by_keys.sql`: `(key, run)` for each key a visible run
    /// holds.
    async fn find(&mut self, workflow: &str, keys: &[&str]) -> Result<Vec<(String, i64)>, Error>;
}

/// Runs a bulk start on `conn`: `(run, created)` for each start of the call,
/// in call order. Nothing is sent for an empty call.
///
/// A key a committed run holds gives that run, `created: false`; a key an
/// open transaction is inserting makes the statement wait for it, as a
/// single start does. At `REPEATABLE READ` or `SERIALIZABLE`, a key's run
/// committed after the caller's snapshot is [`Error::StartConflict`] (retry
/// the transaction), as is a key's run deleted between the two statements.
/// Run it in a transaction: the two statements then start all or nothing.
pub(crate) async fn start_many_with(
    conn: &mut impl BulkConn,
    args: &BulkArgs<'_>,
) -> Result<Vec<(RunId, bool)>, Error> {
    if args.slots.is_empty() {
        return Ok(Vec::new());
    }
    let conflict = || Error::StartConflict {
        workflow: args.workflow.to_owned(),
    };
    let written = match conn.insert(args).await {
        Ok(written) => written,
        Err(StartError::Serialization(_)) if args.keyed() => return Err(conflict()),
        Err(StartError::Serialization(error) | StartError::Other(error)) => return Err(error),
    };
    super::store::check_count(
        "start_many: one row per run",
        i64::try_from(args.inputs.len()).unwrap_or(i64::MAX),
        i64::try_from(written.ids.len()).unwrap_or(i64::MAX),
    )?;
    let created =
        i64::try_from(written.ids.iter().filter(|id| id.is_some()).count()).unwrap_or(i64::MAX);
    super::store::check_count("start_many: first steps", created, written.steps)?;
    super::store::check_count("start_many: started events", created, written.events)?;
    let mut sent: Vec<(Option<i64>, bool)> =
        written.ids.iter().map(|id| (*id, id.is_some())).collect();
    // The keys that were taken: read their runs, committed by now (the
    // insert waited for any transaction that held one).
    let taken: Vec<&str> = sent
        .iter()
        .zip(&args.keys)
        .filter(|((id, _), _)| id.is_none())
        .map(|(_, key)| key.ok_or_else(conflict))
        .collect::<Result<_, _>>()?;
    if !taken.is_empty() {
        let found: HashMap<String, i64> = conn
            .find(args.workflow, &taken)
            .await?
            .into_iter()
            .collect();
        for ((id, _), key) in sent.iter_mut().zip(&args.keys) {
            if id.is_none() {
                let key = key.ok_or_else(conflict)?;
                *id = Some(*found.get(key).ok_or_else(conflict)?);
            }
        }
    }
    let mut started: Vec<(RunId, bool)> = Vec::with_capacity(args.slots.len());
    for slot in &args.slots {
        let one = match *slot {
            Slot::Row(n) => {
                let (id, created) = sent.get(n).copied().ok_or_else(conflict)?;
                (RunId(id.ok_or_else(conflict)?), created)
            }
            Slot::SameAs(index) => {
                let (run, _) = started.get(index).copied().ok_or_else(conflict)?;
                (run, false)
            }
        };
        started.push(one);
    }
    Ok(started)
}

/// A bulk start on a tokio-postgres connection, with both statements
/// prepared for it.
pub(crate) struct PgBulk<'c, C: Conn> {
    pub(crate) conn: &'c C,
    pub(crate) insert: Prepared<'c>,
    pub(crate) find: Prepared<'c>,
}

impl<C: Conn> BulkConn for PgBulk<'_, C> {
    async fn insert(&mut self, args: &BulkArgs<'_>) -> Result<Written, StartError> {
        let rows = match self.insert.query(self.conn, &args.params()).await {
            Ok(rows) => rows,
            Err(Error::Database(db)) if db.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => {
                return Err(StartError::Serialization(Error::Database(db)));
            }
            Err(error) => return Err(StartError::Other(error)),
        };
        let read = || -> Result<Written, tokio_postgres::Error> {
            let mut written = Written {
                ids: Vec::with_capacity(rows.len()),
                steps: 0,
                events: 0,
            };
            for row in &rows {
                written.ids.push(row.try_get("run_id")?);
                written.steps = row.try_get("steps")?;
                written.events = row.try_get("events")?;
            }
            Ok(written)
        };
        read().map_err(|error| StartError::Other(Error::Database(error)))
    }

    async fn find(&mut self, workflow: &str, keys: &[&str]) -> Result<Vec<(String, i64)>, Error> {
        self.find
            .query(self.conn, &[&workflow, &keys])
            .await?
            .into_iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect()
    }
}

/// A bulk start on a caller's sqlx connection: the same two statements, sent
/// unnamed (`persistent(false)`), so nothing is left prepared on it.
#[cfg(feature = "sqlx")]
pub(crate) struct SqlxBulk<'c> {
    pub(crate) conn: &'c mut sqlx::PgConnection,
    pub(crate) sql: &'c super::Statements,
}

#[cfg(feature = "sqlx")]
impl BulkConn for SqlxBulk<'_> {
    async fn insert(&mut self, args: &BulkArgs<'_>) -> Result<Written, StartError> {
        use sqlx::Row as _;
        use sqlx::types::Json;
        let plans: Vec<Json<&Value>> = args.plans.iter().map(Json).collect();
        let inputs: Vec<Json<&Value>> = args.inputs.iter().copied().map(Json).collect();
        let rows = sqlx::query(&self.sql.start_many)
            .persistent(false)
            .bind(args.workflow)
            .bind(args.digest)
            .bind(args.options_digest)
            .bind(&args.step_name)
            .bind(args.timeout_ms)
            .bind(args.now)
            .bind(&args.channel)
            .bind(&args.step_names)
            .bind(plans)
            .bind(inputs)
            .bind(&args.keys)
            .bind(&args.queues)
            .bind(&args.priorities)
            .bind(&args.not_before)
            .bind(&args.delay_ms)
            .bind(&args.queue_overrides)
            .bind(&args.priority_overrides)
            .bind(&args.plan_index)
            .bind(&args.concurrency_keys)
            .bind(&args.deadline_fixed)
            .bind(&args.deadline_from)
            .bind(&args.deadline_ms)
            .bind(&args.on_deadline)
            .fetch_all(&mut *self.conn)
            .await;
        let read = |rows: Vec<sqlx::postgres::PgRow>| -> Result<Written, sqlx::Error> {
            let mut written = Written {
                ids: Vec::with_capacity(rows.len()),
                steps: 0,
                events: 0,
            };
            for row in &rows {
                written.ids.push(row.try_get("run_id")?);
                written.steps = row.try_get("steps")?;
                written.events = row.try_get("events")?;
            }
            Ok(written)
        };
        match rows.and_then(read) {
            Ok(written) => Ok(written),
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("40001") => Err(
                StartError::Serialization(Error::Sqlx(sqlx::Error::Database(db))),
            ),
            Err(error) => Err(StartError::Other(Error::Sqlx(error))),
        }
    }

    async fn find(&mut self, workflow: &str, keys: &[&str]) -> Result<Vec<(String, i64)>, Error> {
        use sqlx::Row as _;
        let rows = sqlx::query(&self.sql.find_runs_by_keys)
            .persistent(false)
            .bind(workflow)
            .bind(keys)
            .fetch_all(&mut *self.conn)
            .await?;
        Ok(rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()?)
    }
}
