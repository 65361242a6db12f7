//! Starting a run: the one place that decides what a start writes and what it
//! returns, whichever connection it runs on (a pooled connection of ours, a
//! caller's tokio-postgres transaction, or a caller's sqlx connection). Every
//! path sends the same two statements, `start_run.sql` and
//! `find_run_by_key.sql`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::statement::{Conn, Prepared};
use crate::context::RunId;
use crate::definition::WorkflowDefinition;
use crate::engine::{RunDeadline, StartPlan, plan_start};
use crate::error::Error;
use crate::start_options::StartOptions;

/// The parameters of `start_run.sql` for one start, in `$n` order.
pub(crate) struct StartArgs<'a> {
    pub(crate) workflow: &'static str,
    pub(crate) digest: &'static str,
    pub(crate) options_digest: &'static str,
    pub(crate) input: &'a Value,
    pub(crate) key: Option<&'a str>,
    pub(crate) step_name: String,
    pub(crate) queue: String,
    pub(crate) priority: i16,
    pub(crate) timeout_ms: Option<i64>,
    pub(crate) delay_ms: i64,
    pub(crate) now: Option<DateTime<Utc>>,
    pub(crate) channel: String,
    pub(crate) step_names: Vec<String>,
    pub(crate) step_plan: Value,
    pub(crate) not_before: Option<DateTime<Utc>>,
    pub(crate) queue_override: Option<String>,
    pub(crate) priority_override: Option<i16>,
    pub(crate) concurrency_key: Option<&'a str>,
    /// The deadline as `start_run.sql` computes it: fixed, or counted from
    /// a time (NULL = now) for some milliseconds ([`RunDeadline::sql_parts`]).
    pub(crate) deadline_fixed: Option<DateTime<Utc>>,
    pub(crate) deadline_from: Option<DateTime<Utc>>,
    pub(crate) deadline_ms: Option<i64>,
    /// `cancel` or `pause`, with a deadline.
    pub(crate) on_deadline: Option<&'static str>,
}

impl<'a> StartArgs<'a> {
    /// What starting `definition` with `input` as `options` say writes (see
    /// [`plan_start`]): its first step as a first attempt, placed for the
    /// run, due at the planned time. `now` is the pinned clock, if any; the
    /// options are judged at it, else at this machine's clock.
    ///
    /// # Errors
    /// The errors of [`plan_start`].
    pub(crate) fn new(
        definition: &'static WorkflowDefinition,
        input: &'a Value,
        options: &'a StartOptions,
        now: Option<DateTime<Utc>>,
        channel: String,
    ) -> Result<Self, Error> {
        let plan = plan_start(definition, options, now.unwrap_or_else(Utc::now))?;
        let mut args = Self::planned(
            definition,
            input,
            options.idempotency_key(),
            plan,
            now,
            channel,
        )?;
        args.concurrency_key = options.run_concurrency_key();
        Ok(args)
    }

    /// The parameters of a start `plan` decided.
    pub(crate) fn planned(
        definition: &'static WorkflowDefinition,
        input: &'a Value,
        key: Option<&'a str>,
        plan: StartPlan,
        now: Option<DateTime<Utc>>,
        channel: String,
    ) -> Result<Self, Error> {
        let (deadline_fixed, deadline_from, deadline_ms) = RunDeadline::sql_parts(plan.deadline);
        Ok(Self {
            workflow: definition.name,
            digest: definition.digest,
            options_digest: definition.options_digest,
            input,
            key,
            step_name: plan.first.step_name,
            queue: plan.first.queue,
            priority: plan.first.priority,
            timeout_ms: plan.first.timeout_ms,
            delay_ms: i64::try_from(plan.due.delay_ms).unwrap_or(i64::MAX),
            now,
            channel,
            step_names: plan.step_names,
            step_plan: serde_json::to_value(plan.step_plan)?,
            not_before: plan.due.not_before,
            queue_override: plan.overrides.queue,
            priority_override: plan.overrides.priority,
            concurrency_key: None,
            deadline_fixed,
            deadline_from,
            deadline_ms,
            on_deadline: plan.deadline.map(|_| plan.on_deadline.as_str()),
        })
    }

    /// The parameters as tokio-postgres takes them.
    fn params(&self) -> [&(dyn ToSql + Sync); 22] {
        [
            &self.workflow,
            &self.digest,
            &self.options_digest,
            self.input,
            &self.key,
            &self.step_name,
            &self.queue,
            &self.priority,
            &self.timeout_ms,
            &self.delay_ms,
            &self.now,
            &self.channel,
            &self.step_names,
            &self.step_plan,
            &self.not_before,
            &self.queue_override,
            &self.priority_override,
            &self.concurrency_key,
            &self.deadline_fixed,
            &self.deadline_from,
            &self.deadline_ms,
            &self.on_deadline,
        ]
    }
}

/// What `start_run.sql` returned when it inserted a run: `(run id, step rows,
/// event rows)`.
pub(crate) type Inserted = (i64, i64, i64);

/// A connection a start runs on: the two statements of a start, sent on it.
pub(crate) trait StartConn {
    /// Runs `start_run.sql`; `None` when the idempotency key was taken.
    /// A serialization failure comes back as [`StartError::Serialization`].
    async fn insert(&mut self, args: &StartArgs<'_>) -> Result<Option<Inserted>, StartError>;
    /// Runs `find_run_by_key.sql`: the run holding `key`, if one is visible.
    async fn find(&mut self, workflow: &str, key: &str) -> Result<Option<i64>, Error>;
}

/// Why `start_run.sql` failed.
pub(crate) enum StartError {
    /// Postgres reported a serialization failure (SQLSTATE 40001).
    Serialization(Error),
    /// Anything else.
    Other(Error),
}

/// Starts a run on `conn`: `(run, created)`.
///
/// With a key, a run that a committed start holds is returned instead, with
/// `created` false. The insert waits for a transaction that holds the key and
/// has not ended: if it rolls back, this start creates the run; if it commits,
/// a `READ COMMITTED` caller gets that run. A caller at `REPEATABLE READ` or
/// `SERIALIZABLE` whose snapshot predates the other start's commit cannot see
/// that run: Postgres fails the insert with a serialization failure, and the
/// start returns [`Error::StartConflict`] (retry the transaction).
pub(crate) async fn start_with(
    conn: &mut impl StartConn,
    args: &StartArgs<'_>,
) -> Result<(RunId, bool), Error> {
    let conflict = || Error::StartConflict {
        workflow: args.workflow.to_owned(),
    };
    match conn.insert(args).await {
        Ok(Some((run_id, steps, events))) => {
            super::store::check_count("start_run: first step", 1, steps)?;
            super::store::check_count("start_run: started event", 1, events)?;
            Ok((RunId(run_id), true))
        }
        Ok(None) => {
            // The key was taken: return the run that holds it. The insert
            // waited for the other transaction, so that run is committed.
            let Some(key) = args.key else {
                return Err(Error::RowCount {
                    statement: "start_run",
                    expected: 1,
                    found: 0,
                });
            };
            match conn.find(args.workflow, key).await? {
                Some(run_id) => Ok((RunId(run_id), false)),
                // Deleted by retention since, or invisible to the caller's
                // snapshot: either way, a retry decides afresh.
                None => Err(conflict()),
            }
        }
        Err(StartError::Serialization(_)) if args.key.is_some() => Err(conflict()),
        Err(StartError::Serialization(error) | StartError::Other(error)) => Err(error),
    }
}

/// A start on a tokio-postgres connection, with both statements prepared for it.
pub(crate) struct PgStart<'c, C: Conn> {
    pub(crate) conn: &'c C,
    pub(crate) insert: Prepared<'c>,
    pub(crate) find: Prepared<'c>,
}

impl<C: Conn> StartConn for PgStart<'_, C> {
    async fn insert(&mut self, args: &StartArgs<'_>) -> Result<Option<Inserted>, StartError> {
        match self.insert.query_opt(self.conn, &args.params()).await {
            Ok(row) => Ok(row.map(|row| (row.get(0), row.get(1), row.get(2)))),
            Err(Error::Database(db)) if db.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => {
                Err(StartError::Serialization(Error::Database(db)))
            }
            Err(error) => Err(StartError::Other(error)),
        }
    }

    async fn find(&mut self, workflow: &str, key: &str) -> Result<Option<i64>, Error> {
        Ok(self
            .find
            .query_opt(self.conn, &[&workflow, &key])
            .await?
            .map(|row| row.get(0)))
    }
}

/// A start on a caller's sqlx connection: the same two statements, sent
/// unnamed (`persistent(false)`), so nothing is left prepared on it.
#[cfg(feature = "sqlx")]
pub(crate) struct SqlxStart<'c> {
    pub(crate) conn: &'c mut sqlx::PgConnection,
    pub(crate) sql: &'c super::Statements,
}

#[cfg(feature = "sqlx")]
impl StartConn for SqlxStart<'_> {
    async fn insert(&mut self, args: &StartArgs<'_>) -> Result<Option<Inserted>, StartError> {
        use sqlx::Row as _;
        use sqlx::types::Json;
        let row = sqlx::query(&self.sql.start_run)
            .persistent(false)
            .bind(args.workflow)
            .bind(args.digest)
            .bind(args.options_digest)
            .bind(Json(args.input))
            .bind(args.key)
            .bind(&args.step_name)
            .bind(&args.queue)
            .bind(args.priority)
            .bind(args.timeout_ms)
            .bind(args.delay_ms)
            .bind(args.now)
            .bind(&args.channel)
            .bind(&args.step_names)
            .bind(Json(&args.step_plan))
            .bind(args.not_before)
            .bind(args.queue_override.as_deref())
            .bind(args.priority_override)
            .bind(args.concurrency_key)
            .bind(args.deadline_fixed)
            .bind(args.deadline_from)
            .bind(args.deadline_ms)
            .bind(args.on_deadline)
            .fetch_optional(&mut *self.conn)
            .await;
        let read = |row: sqlx::postgres::PgRow| -> Result<Inserted, sqlx::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        match row.and_then(|row| row.map(read).transpose()) {
            Ok(inserted) => Ok(inserted),
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("40001") => Err(
                StartError::Serialization(Error::Sqlx(sqlx::Error::Database(db))),
            ),
            Err(error) => Err(StartError::Other(Error::Sqlx(error))),
        }
    }

    async fn find(&mut self, workflow: &str, key: &str) -> Result<Option<i64>, Error> {
        use sqlx::Row as _;
        let row = sqlx::query(&self.sql.find_run_by_key)
            .persistent(false)
            .bind(workflow)
            .bind(key)
            .fetch_optional(&mut *self.conn)
            .await?;
        Ok(row.map(|row| row.try_get(0)).transpose()?)
    }
}
