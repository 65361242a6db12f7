//! The client: start runs, read them back, list them.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tracing::instrument;

use crate::context::{RunId, SignalId};
use crate::engine::{Action, RunStatus, StepOutcome, StepStatus};
use crate::error::Error;
use crate::pg::store::{PgStore, parse_stored};
use crate::view::{
    BatchView, EventView, Omitted, RunCounts, RunFilter, RunRead, RunSummary, RunView, SignalView,
    StepView, ValueOf,
};
use crate::window::Range;
use crate::workflow::Workflow;

/// Starts and reads runs. Cheap to clone; all clones share one pool.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) store: PgStore,
}

/// What a start did: the run, and whether this call created it. Every start
/// returns one ([`Client::start`], [`Client::start_idempotent`], their `_in`
/// and `_in_sqlx` forms, and the testkit's `TestEnv::start`), so code that
/// starts runs reads the same with a key or without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Started {
    /// The run.
    pub run_id: RunId,
    /// `true` when this call created it (always, for a start without a key);
    /// `false` when an earlier start with the same key did, and nothing was
    /// started now.
    pub created: bool,
}

impl Started {
    /// What a start did: created `run_id` (`created`), or found it. For the
    /// testkit's store; hidden, so a field added later breaks no caller.
    #[doc(hidden)]
    #[must_use]
    pub const fn new(run_id: RunId, created: bool) -> Self {
        Self { run_id, created }
    }
}

impl From<Started> for RunId {
    fn from(started: Started) -> Self {
        started.run_id
    }
}

impl Client {
    /// Starts a run of `W` with `input`. Its first step is due after that step's
    /// `wait`, counted on the database clock.
    ///
    /// # Errors
    /// [`Error::Json`] when the input does not serialize, [`Error::NoSteps`], and
    /// database errors.
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start<W: Workflow>(&self, input: &W::Input) -> Result<Started, Error> {
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self.store.start_run(W::DEFINITION, &input, None).await?;
        Ok(Started { run_id, created })
    }

    /// Starts a run of `W` unless one was already started with `key` (keys are per
    /// workflow): then returns that run and starts nothing. Two concurrent calls
    /// with one key start one run. (Idempotency keys as in Stripe's API.)
    ///
    /// # Errors
    /// [`Error::BlankIdempotencyKey`] for an empty or blank key,
    /// [`Error::InvalidIdempotencyKey`] for one over 255 characters or with control
    /// characters, and the errors of [`Client::start`].
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent<W: Workflow>(
        &self,
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        check_key(key)?;
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self
            .store
            .start_run(W::DEFINITION, &input, Some(key))
            .await?;
        Ok(Started { run_id, created })
    }

    /// Starts a run of `W` with `input` inside the caller's transaction `tx`
    /// (any tokio-postgres client or transaction on this database; for one of
    /// [`Database::pool`](crate::Database::pool), pass `&*tx`), so the run
    /// commits or rolls back with the caller's own rows: it exists exactly
    /// when `tx` commits, and nothing of it (run, step, event) when `tx` rolls
    /// back. The workers' wake-up is a `pg_notify` in `tx`, which Postgres
    /// delivers only at commit, so no worker looks for the run before it is
    /// visible. As River's `InsertTx` and Oban's `insert` inside
    /// `Repo.transaction`.
    ///
    /// The statement is sent unnamed (one round trip, nothing left prepared
    /// on the caller's connection, safe behind a transaction-mode pooler). The
    /// first step's due time counts from `clock_timestamp()`, not from the
    /// start of a long transaction. Given a plain client
    /// rather than a transaction, the start commits on its own, as
    /// [`Client::start`] does.
    ///
    /// # Errors
    /// As [`Client::start`]. A statement that fails aborts the caller's
    /// transaction, as any failed statement does.
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        input: &W::Input,
    ) -> Result<Started, Error> {
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self
            .store
            .start_run_on(tx, W::DEFINITION, &input, None)
            .await?;
        Ok(Started { run_id, created })
    }

    /// [`Client::start_idempotent`] inside the caller's transaction `tx`, as
    /// [`Client::start_in`]. Behaves as outside a transaction: a run that a
    /// committed start holds `key` for is returned with `created: false`; a
    /// transaction that holds the key and is still open makes this start wait
    /// for it: if it rolls back, this start creates the run, if it commits,
    /// this one returns its run. If `tx` rolls back, a run it created is gone
    /// and the key free again.
    ///
    /// At `REPEATABLE READ` or `SERIALIZABLE`, a run with `key` committed
    /// after `tx`'s snapshot was taken cannot be returned (the transaction
    /// cannot see it): the start fails with [`Error::StartConflict`] and `tx`
    /// must be retried, as for any serialization failure.
    ///
    /// # Errors
    /// [`Error::StartConflict`] as above, and the errors of
    /// [`Client::start_idempotent`].
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent_in<W: Workflow>(
        &self,
        tx: &(impl tokio_postgres::GenericClient + Sync),
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        check_key(key)?;
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self
            .store
            .start_run_on(tx, W::DEFINITION, &input, Some(key))
            .await?;
        Ok(Started { run_id, created })
    }

    /// [`Client::start_in`] on a caller's sqlx connection, with the `sqlx`
    /// feature: pass `&mut *tx` for a `sqlx::Transaction<'_, Postgres>` (it
    /// dereferences to a `PgConnection`). The run exists exactly when the
    /// caller's transaction commits; the wake-up arrives at commit. Sent
    /// unnamed (`persistent(false)`): nothing is left in the connection's
    /// statement cache or on the server. The same SQL and the same decisions
    /// as every other start.
    ///
    /// # Errors
    /// As [`Client::start`]; [`Error::Sqlx`] for what the connection reports.
    #[cfg(feature = "sqlx")]
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        input: &W::Input,
    ) -> Result<Started, Error> {
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self
            .store
            .start_run_sqlx(conn, W::DEFINITION, &input, None)
            .await?;
        Ok(Started { run_id, created })
    }

    /// [`Client::start_idempotent_in`] on a caller's sqlx connection (see
    /// [`Client::start_in_sqlx`]): the same key semantics, the same
    /// [`Error::StartConflict`] at `REPEATABLE READ`.
    ///
    /// # Errors
    /// As [`Client::start_idempotent_in`]; [`Error::Sqlx`] for what the
    /// connection reports.
    #[cfg(feature = "sqlx")]
    #[instrument(skip_all, fields(pgbus.workflow = W::DEFINITION.name), err(level = "debug"))]
    pub async fn start_idempotent_in_sqlx<W: Workflow>(
        &self,
        conn: &mut sqlx::PgConnection,
        input: &W::Input,
        key: &str,
    ) -> Result<Started, Error> {
        check_key(key)?;
        let input = serde_json::to_value(input)?;
        self.store.limits.check_input(&input)?;
        let (run_id, created) = self
            .store
            .start_run_sqlx(conn, W::DEFINITION, &input, Some(key))
            .await?;
        Ok(Started { run_id, created })
    }

    /// Pauses a run: nothing new of it is claimed until [`Client::resume`]. A step
    /// that is running when the pause lands still records its outcome, and its
    /// next row is scheduled but held; if it was the last step, the run finishes.
    /// `actor` (who, e.g. `alice@ops`) and `reason` go on the `paused` event.
    /// Returns the run's new status.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is already paused or has ended,
    /// [`Error::RunNotFound`], [`Error::InvalidActor`], [`Error::InvalidReason`]
    /// (see [`check_reason`]), and database errors.
    #[instrument(skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn pause(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Pause, actor, reason).await
    }

    /// Resumes a paused run: a held row goes on; a step that failed and paused
    /// the run runs again now as a new attempt, with its reattempt count reset; a
    /// step that paused the run with `Flow::Pause` is followed by the next step
    /// (after its `wait`), or the run finishes. Writes a `resumed` event.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is not paused, and the errors of
    /// [`Client::pause`].
    #[instrument(skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn resume(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Resume, actor, reason).await
    }

    /// Cancels a run that has not ended: every open step row is cancelled, and a
    /// body still running has its completion ignored (and is told through
    /// [`StepCx::cancelled`](crate::StepCx::cancelled) at the worker's next
    /// heartbeat). Writes a `cancelled` event.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run has ended, and the errors of
    /// [`Client::pause`].
    #[instrument(skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn cancel(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Cancel, actor, reason).await
    }

    /// Skips the step a paused run would run on resume, and lets the run go on
    /// from the step after it (or finish): a held row is marked `skipped`; a
    /// failed step is passed over. Writes `step_skipped`, then `resumed` (or
    /// `finished`).
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is not paused, its step is still
    /// running, or nothing is pending (the step completed and paused the run with
    /// `Flow::Pause`: resume instead), and the errors of [`Client::pause`].
    #[instrument(skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn skip(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Skip, actor, reason).await
    }

    async fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        check_actor(actor)?;
        check_reason(reason)?;
        let reason = crate::error::cap_message(reason);
        self.store.act(run_id, action, actor, &reason).await
    }

    /// Sends signal `name` with `payload` to a run: stored under the run's lock,
    /// recorded as a `signal_received` event (reason: the name), and waking the
    /// run's steps that wait for `name`. A signal sent before any step waits for
    /// it is kept until one does; each signal is consumed by one attempt. A
    /// paused run keeps it, and goes on with it once resumed.
    ///
    /// # Errors
    /// [`Error::RunEnded`] for a finished or cancelled run and
    /// [`Error::RunNotFound`] for a missing one (nothing is stored);
    /// [`Error::InvalidSignal`] for a bad name or a payload with a NUL character;
    /// [`Error::Json`] when the payload does not serialize; database errors.
    #[instrument(skip_all, fields(pgbus.run_id = %run_id, pgbus.signal = name), err(level = "debug"))]
    pub async fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, Error> {
        let payload = serde_json::to_value(payload)?;
        self.store.limits.check_signal(name, &payload)?;
        self.store.signal(run_id, name, &payload).await
    }

    /// A run with its latest 1,000 step attempts, events, signals and
    /// batches ([`RunRead::default`]), read in one snapshot (a read-only
    /// repeatable-read transaction), so its parts agree with each other even
    /// while workers move the run. [`RunView::counts`] says how many there
    /// are in all; [`Client::run_with`] reads more or less.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], and database errors.
    pub async fn run(&self, run_id: RunId) -> Result<RunView, Error> {
        self.run_with(run_id, RunRead::default()).await
    }

    /// A run as `read` bounds it: its latest `read.last` attempts, events,
    /// signals and batches (with the older events their timeline needs),
    /// and values no longer than `read.value_bytes`, in one snapshot as
    /// [`Client::run`] reads it. A run of any length costs a bounded read.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], and database errors.
    #[instrument(skip_all, fields(pgbus.run_id = %run_id), err(level = "debug"))]
    pub async fn run_with(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        let last = i64::try_from(read.kept()).unwrap_or(i64::MAX);
        let pause_marks = i64::try_from(read.pause_marks()).unwrap_or(i64::MAX);
        let value_bytes = read
            .value_bytes
            .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
        let mut guarded = self.store.guarded().await?;
        let read = async {
            let client = guarded
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let sql = &self.store.sql;
            let statement = self.store.prep.in_tx(&client, &sql.get_run).await?;
            let Some(row) = statement
                .query_opt(&client, &[&run_id.0, &value_bytes])
                .await?
            else {
                return Err(Error::RunNotFound { run_id });
            };
            let mut omitted = Vec::new();
            // Whether the row's value was left out for its length.
            let mut left_out = |row: &tokio_postgres::Row, column: &str, what: ValueOf| {
                let bytes: Option<i64> = row.get(column);
                let over = bytes.filter(|&b| value_bytes.is_some_and(|most| b > most));
                if let Some(bytes) = over {
                    omitted.push(Omitted::new(what, bytes));
                }
                over.is_some()
            };
            let _ = left_out(&row, "input_bytes", ValueOf::Input);
            let mut view = run_view(&row)?;

            let statement = self.store.prep.in_tx(&client, &sql.run_steps).await?;
            for row in statement
                .query(&client, &[&run_id.0, &last, &value_bytes])
                .await?
            {
                let over = left_out(
                    &row,
                    "output_bytes",
                    ValueOf::Output {
                        step_id: row.get("id"),
                    },
                );
                let mut step = step_view(&row)?;
                if over {
                    // An output there was, though not read: `Some`, as an
                    // output that is JSON `null` reads.
                    step.output = Some(Value::Null);
                }
                view.steps.push(step);
            }

            let first_step = view.steps.first().map_or(i64::MAX, |step| step.id);
            let statement = self.store.prep.in_tx(&client, &sql.run_events).await?;
            for row in statement
                .query(&client, &[&run_id.0, &last, &first_step, &pause_marks])
                .await?
            {
                view.events.push(event_view(&row)?);
            }

            let statement = self.store.prep.in_tx(&client, &sql.run_signals).await?;
            for row in statement
                .query(&client, &[&run_id.0, &last, &value_bytes])
                .await?
            {
                let id = crate::SignalId(row.get("id"));
                let _ = left_out(&row, "payload_bytes", ValueOf::Payload { signal_id: id });
                view.signals.push(SignalView {
                    id,
                    name: row.get("name"),
                    payload: json(&row, "payload")?.unwrap_or(Value::Null),
                    created_at: row.get("created_at"),
                    consumed_by: row.get("consumed_by"),
                    consumed_at: row.get("consumed_at"),
                });
            }

            let statement = self.store.prep.in_tx(&client, &sql.run_batches).await?;
            for row in statement.query(&client, &[&run_id.0, &last]).await? {
                view.batches.push(batch_view(&row));
            }
            client.commit().await?;
            view.omitted = omitted;
            Ok(view)
        }
        .await;
        guarded.finish();
        read
    }

    /// Runs started, finished, paused and cancelled in each bucket of
    /// `range` (a [`Window`](crate::window::Window) placed in time), oldest
    /// first, every bucket present (zeros where nothing happened). Times are
    /// the database's.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(skip_all, err(level = "debug"))]
    pub async fn run_counts(&self, range: &Range) -> Result<Vec<BucketCounts>, Error> {
        let mut client = self.store.guarded().await?;
        let statement = self
            .store
            .prep
            .on(&mut client, &self.store.sql.run_counts)
            .await?;
        let bucket_ms = i64::try_from(range.bucket.as_millis()).unwrap_or(i64::MAX);
        let rows = statement
            .query(&*client, &[&range.from, &range.to, &bucket_ms])
            .await;
        client.finish();
        let rows = rows?;
        let found: std::collections::HashMap<DateTime<Utc>, BucketCounts> = rows
            .iter()
            .map(|row| {
                let bucket: DateTime<Utc> = row.get("bucket");
                (
                    bucket,
                    BucketCounts {
                        bucket,
                        started: row.get("started"),
                        finished: row.get("finished"),
                        paused: row.get("paused"),
                        cancelled: row.get("cancelled"),
                    },
                )
            })
            .collect();
        Ok(range
            .buckets()
            .into_iter()
            .map(|bucket| {
                found.get(&bucket).copied().unwrap_or(BucketCounts {
                    bucket,
                    started: 0,
                    finished: 0,
                    paused: 0,
                    cancelled: 0,
                })
            })
            .collect())
    }

    /// Step attempts that ended in each bucket of `range`, per outcome,
    /// oldest first; buckets and outcomes without attempts are absent.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for an unknown stored outcome.
    #[instrument(skip_all, err(level = "debug"))]
    pub async fn step_outcomes(&self, range: &Range) -> Result<Vec<OutcomeCount>, Error> {
        let mut client = self.store.guarded().await?;
        let statement = self
            .store
            .prep
            .on(&mut client, &self.store.sql.step_insights)
            .await?;
        let bucket_ms = i64::try_from(range.bucket.as_millis()).unwrap_or(i64::MAX);
        let rows = statement
            .query(&*client, &[&range.from, &range.to, &bucket_ms])
            .await;
        client.finish();
        rows?
            .iter()
            .map(|row| {
                Ok(OutcomeCount {
                    bucket: row.get("bucket"),
                    outcome: parse_stored::<StepOutcome>(&row.get::<_, String>("outcome"))?,
                    steps: row.get("steps"),
                })
            })
            .collect()
    }

    /// The `limit` steps that ran longest on average among attempts that
    /// ended in `range`, with their pickup latency.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(skip_all, err(level = "debug"))]
    pub async fn slowest_steps(
        &self,
        range: &Range,
        limit: i64,
    ) -> Result<Vec<StepTimings>, Error> {
        let mut client = self.store.guarded().await?;
        let statement = self
            .store
            .prep
            .on(&mut client, &self.store.sql.slowest_steps)
            .await?;
        let rows = statement
            .query(&*client, &[&range.from, &range.to, &limit])
            .await;
        client.finish();
        Ok(rows?
            .iter()
            .map(|row| StepTimings {
                workflow: row.get("workflow"),
                step: row.get("step_name"),
                attempts: row.get("attempts"),
                mean_ms: row.get("mean_ms"),
                max_ms: row.get("max_ms"),
                pickup_p50_ms: row.get("pickup_p50_ms"),
                pickup_p99_ms: row.get("pickup_p99_ms"),
            })
            .collect())
    }

    /// Runs matching `filter`, newest first.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(skip_all, err(level = "debug"))]
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        let mut client = self.store.guarded().await?;
        let statement = self
            .store
            .prep
            .on(&mut client, &self.store.sql.list_runs)
            .await?;
        let limit = i64::from(filter.limit.unwrap_or(100).clamp(1, 1_000));
        let rows = statement
            .query(
                &*client,
                &[
                    &filter.workflow,
                    &filter.status.map(RunStatus::as_str),
                    &limit,
                    &filter.before.map(|id| id.0),
                    &filter.created_after,
                    &filter.created_before,
                ],
            )
            .await;
        client.finish();
        rows?.iter().map(run_summary).collect()
    }
}

/// A run's row as listed (`list_runs.sql`) or read (`get_run.sql`).
fn run_summary(row: &tokio_postgres::Row) -> Result<RunSummary, Error> {
    Ok(RunSummary {
        id: RunId(row.get("id")),
        workflow: row.get("workflow"),
        status: parse_stored::<RunStatus>(&row.get::<_, String>("status"))?,
        current_step: row.get("current_step"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        finished_at: row.get("finished_at"),
    })
}

/// A run's row as read by `get_run.sql`, without its lists.
fn run_view(row: &tokio_postgres::Row) -> Result<RunView, Error> {
    Ok(RunView {
        run: run_summary(row)?,
        definition_digest: row.get("definition_digest"),
        options_digest: row.get("options_digest"),
        input: json(row, "input")?.unwrap_or(Value::Null),
        idempotency_key: row.get("idempotency_key"),
        error_class: row.get("error_class"),
        error_message: row.get("error_message"),
        paused_at: row.get("paused_at"),
        cancelled_at: row.get("cancelled_at"),
        steps: Vec::new(),
        events: Vec::new(),
        parent_batch_id: row.get("parent_batch_id"),
        signals: Vec::new(),
        batches: Vec::new(),
        counts: RunCounts::new(
            row.get("attempt_count"),
            row.get("event_count"),
            row.get("pause_count"),
            row.get("signal_count"),
            row.get("batch_count"),
        ),
        omitted: Vec::new(),
    })
}

/// An attempt's row as read by `run_steps.sql`.
fn step_view(row: &tokio_postgres::Row) -> Result<StepView, Error> {
    let outcome: Option<String> = row.get("outcome");
    let causes: Option<Value> = json(row, "error_causes")?;
    Ok(StepView {
        id: row.get("id"),
        step_name: row.get("step_name"),
        attempt: row.get("attempt"),
        status: parse_stored::<StepStatus>(&row.get::<_, String>("status"))?,
        outcome: outcome
            .as_deref()
            .map(parse_stored::<StepOutcome>)
            .transpose()?,
        queue: row.get("queue"),
        priority: row.get("priority"),
        scheduled_at: row.get("scheduled_at"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
        stall_at: row.get("stall_at"),
        worker_id: row.get("worker_id"),
        output: json(row, "output")?,
        error_class: row.get("error_class"),
        error_message: row.get("error_message"),
        error_causes: causes
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default(),
        waiting_for: row.get("waiting_for"),
        waiting_since: row.get("waiting_since"),
        created_at: row.get("created_at"),
    })
}

/// An event's row as read by `run_events.sql`.
fn event_view(row: &tokio_postgres::Row) -> Result<EventView, Error> {
    Ok(EventView {
        id: row.get("id"),
        step_id: row.get("step_id"),
        step_name: row.get("step_name"),
        attempt: row.get("attempt"),
        event: row.get("event"),
        actor: row.get("actor"),
        reason: row.get("reason"),
        details: json(row, "details")?,
        created_at: row.get("created_at"),
    })
}

/// A batch's row as read by `run_batches.sql`.
fn batch_view(row: &tokio_postgres::Row) -> BatchView {
    BatchView {
        id: row.get("id"),
        parent_step_id: row.get("parent_step_id"),
        total: row.get("total"),
        finished: row.get("succeeded"),
        cancelled: row.get("failed"),
        status: row.get("status"),
        created_at: row.get("created_at"),
        resolved_at: row.get("resolved_at"),
    }
}

/// Run counts of one time bucket (see [`Client::run_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BucketCounts {
    /// The bucket's start.
    pub bucket: DateTime<Utc>,
    /// Runs created in it.
    pub started: i64,
    /// Runs that finished in it.
    pub finished: i64,
    /// Times a run was paused in it (a `paused` event: by an operator, a
    /// step's `Pause`, a policy or a stall).
    pub paused: i64,
    /// Runs cancelled in it.
    pub cancelled: i64,
}

/// Step attempts of one outcome that ended in one time bucket (see
/// [`Client::step_outcomes`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct OutcomeCount {
    /// The bucket's start.
    pub bucket: DateTime<Utc>,
    /// How the attempts ended.
    pub outcome: StepOutcome,
    /// How many.
    pub steps: i64,
}

/// One step's timings over a window (see [`Client::slowest_steps`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct StepTimings {
    /// The workflow.
    pub workflow: String,
    /// The step.
    pub step: String,
    /// Attempts that ended in the window.
    pub attempts: i64,
    /// Their mean run time (start of the last claim to the end), ms.
    pub mean_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
    /// Median pickup latency (started minus due), ms.
    pub pickup_p50_ms: f64,
    /// 99th percentile pickup latency, ms.
    pub pickup_p99_ms: f64,
}

/// A JSON column, or a typed error when the driver cannot read it back (JSON nested
/// deeper than `serde_json` reads): never a panic.
fn json(row: &tokio_postgres::Row, column: &str) -> Result<Option<Value>, Error> {
    row.try_get::<_, Option<Value>>(column).map_err(|e| {
        Error::Corrupt(format!(
            "column `{column}`: {}",
            crate::error::display_chain(&e)
        ))
    })
}

/// The rules every store applies to an operator action's actor: 1 to 255
/// characters of visible text: no control characters, no invisible formatting
/// characters (zero-width spaces and joiners, direction marks and overrides, the
/// byte-order mark), no whitespace at either end.
///
/// # Errors
/// [`Error::InvalidActor`].
pub fn check_actor(actor: &str) -> Result<(), Error> {
    let invisible = |c: char| c.is_control() || pgbus_core::is_invisible(c);
    if actor.is_empty()
        || actor.trim() != actor
        || actor.chars().count() > crate::error::MAX_IDEMPOTENCY_KEY_CHARS
        || actor.chars().any(invisible)
    {
        return Err(Error::InvalidActor);
    }
    Ok(())
}

/// The rule every store, the command and the dashboard apply to an operator
/// action's reason: some visible text (at least one character that is not
/// whitespace, a control or an invisible formatting character), at
/// most [`MAX_ERROR_MESSAGE_CHARS`](crate::error::MAX_ERROR_MESSAGE_CHARS)
/// (10,000) characters.
///
/// # Errors
/// [`Error::InvalidReason`].
pub fn check_reason(reason: &str) -> Result<(), Error> {
    let visible = |c: char| !c.is_whitespace() && !c.is_control() && !pgbus_core::is_invisible(c);
    if !reason.chars().any(visible)
        || reason.chars().count() > crate::error::MAX_ERROR_MESSAGE_CHARS
    {
        return Err(Error::InvalidReason);
    }
    Ok(())
}

/// The rules every store applies to an idempotency key.
///
/// # Errors
/// [`Error::BlankIdempotencyKey`] and [`Error::InvalidIdempotencyKey`].
pub fn check_key(key: &str) -> Result<(), Error> {
    if key.trim().is_empty() {
        return Err(Error::BlankIdempotencyKey);
    }
    if key.chars().count() > crate::error::MAX_IDEMPOTENCY_KEY_CHARS
        || key.chars().any(char::is_control)
    {
        return Err(Error::InvalidIdempotencyKey);
    }
    Ok(())
}
