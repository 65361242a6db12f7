//! Starting many runs at once: `start_many.sql` writes every run of the call
//! in one statement (arrays bound as parameters, `unnest`ed), and
//! `find_runs_by_keys.sql` reads back, in one more, the runs of keys that
//! were taken before. Two statements at most, whatever the count, on any
//! connection (a transaction of our pool, or a caller's).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::statement::{Conn, Prepared};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::{BulkStart, RunOverrides};
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
        }
        Ok(args)
    }

    /// The parameters as tokio-postgres takes them.
    fn params(&self) -> [&(dyn ToSql + Sync); 18] {
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
        ]
    }

    /// Whether any run sent has a key.
    fn keyed(&self) -> bool {
        self.keys.iter().any(Option::is_some)
    }
}

/// Runs a bulk start on `conn` with the two statements prepared for it:
/// `(run, created)` for each start of the call, in call order. Nothing is
/// sent for an empty call.
///
/// A key a committed run holds gives that run, `created: false`; a key an
/// open transaction is inserting makes the statement wait for it, as a
/// single start does. At `REPEATABLE READ` or `SERIALIZABLE`, a key's run
/// committed after the caller's snapshot is [`Error::StartConflict`] (retry
/// the transaction), as is a key's run deleted between the two statements.
/// Run it in a transaction: the two statements then start all or nothing.
pub(crate) async fn start_many_on(
    conn: &impl Conn,
    insert: &Prepared<'_>,
    find: &Prepared<'_>,
    args: &BulkArgs<'_>,
) -> Result<Vec<(RunId, bool)>, Error> {
    if args.slots.is_empty() {
        return Ok(Vec::new());
    }
    let conflict = || Error::StartConflict {
        workflow: args.workflow.to_owned(),
    };
    let rows = match insert.query(conn, &args.params()).await {
        Ok(rows) => rows,
        Err(Error::Database(db))
            if args.keyed() && db.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) =>
        {
            return Err(conflict());
        }
        Err(error) => return Err(error),
    };
    super::store::check_count(
        "start_many: one row per run",
        i64::try_from(args.inputs.len()).unwrap_or(i64::MAX),
        i64::try_from(rows.len()).unwrap_or(i64::MAX),
    )?;
    let mut sent: Vec<(Option<i64>, bool)> = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: Option<i64> = row.try_get("run_id")?;
        sent.push((id, id.is_some()));
    }
    let created =
        i64::try_from(sent.iter().filter(|(_, created)| *created).count()).unwrap_or(i64::MAX);
    if let Some(first) = rows.first() {
        super::store::check_count("start_many: first steps", created, first.try_get("steps")?)?;
        super::store::check_count(
            "start_many: started events",
            created,
            first.try_get("events")?,
        )?;
    }
    // The keys that were taken: read their runs, committed by now (the
    // insert waited for any transaction that held one).
    let taken: Vec<&str> = sent
        .iter()
        .zip(&args.keys)
        .filter(|((id, _), _)| id.is_none())
        .map(|(_, key)| key.ok_or_else(conflict))
        .collect::<Result<_, _>>()?;
    if !taken.is_empty() {
        let found: HashMap<String, i64> = find
            .query(conn, &[&args.workflow, &taken])
            .await?
            .into_iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()?;
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
