//! Reading runs back: one run in one snapshot, and lists of runs.

use serde_json::Value;
use tracing::instrument;

use super::Client;
use crate::context::RunId;
use crate::engine::{BatchStatus, RunStatus, StepOutcome, StepStatus};
use crate::error::Error;
use crate::pg::store::parse_stored;
use crate::view::{
    BatchView, EventView, Missing, Omitted, RunCounts, RunFilter, RunRead, RunSummary, RunView,
    SignalView, StepView, Unrunnable, ValueOf,
};

impl Client {
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
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id), err(level = "debug"))]
    pub async fn run_with(&self, run_id: RunId, read: RunRead) -> Result<RunView, Error> {
        let last = i64::try_from(read.kept()).unwrap_or(i64::MAX);
        let pause_marks = i64::try_from(read.pause_marks()).unwrap_or(i64::MAX);
        let value_bytes = read
            .value_bytes
            .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
        let lost_ms = read.lost_ms();
        let now = self.store.clock.now();
        let mut guarded = self.store.guarded().await?;
        let read = async {
            let client = snapshot(&mut guarded).start().await?;
            let (sql, prep) = (&self.store.sql, &self.store.prep);
            let statement = prep.in_driver_tx(&client, &sql.get_run).await?;
            let Some(row) = statement
                .query_opt(&client, &[&run_id.0, &value_bytes, &now, &lost_ms])
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

            let statement = prep.in_driver_tx(&client, &sql.run_steps).await?;
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
            let statement = prep.in_driver_tx(&client, &sql.run_events).await?;
            for row in statement
                .query(&client, &[&run_id.0, &last, &first_step, &pause_marks])
                .await?
            {
                view.events.push(event_view(&row)?);
            }

            let statement = prep.in_driver_tx(&client, &sql.run_signals).await?;
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

            let statement = prep.in_driver_tx(&client, &sql.run_batches).await?;
            let checked = BatchView::CHILDREN_CHECKED;
            for row in statement
                .query(&client, &[&run_id.0, &last, &now, &lost_ms, &checked])
                .await?
            {
                view.batches.push(batch_view(&row)?);
            }
            client.commit().await?;
            view.omitted = omitted;
            Ok(view)
        }
        .await;
        guarded.finish();
        read
    }

    /// Runs matching `filter`: one page of at most `filter.limit` (100 by
    /// default, at most 1,000), newest first (see [`RunFilter`] for the
    /// pages and what each field keeps). Each run is read with bounded
    /// lookups; a filter on the input reads at most
    /// [`RunFilter::INPUT_SCAN`] runs.
    ///
    /// # Errors
    /// [`Error::InvalidInputPath`] for an input path PostgreSQL does not
    /// read; database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, Error> {
        let mut client = self.store.guarded().await?;
        let rows = async {
            if let Some(path) = &filter.input_path {
                check_input_path(&client, path).await?;
            }
            // A list by workflow reads per name and status; with an input
            // path, the newest runs in id order, so the path's scan is
            // bounded once for the whole list.
            let by_workflow = filter.input_path.is_none()
                && (filter.workflow.is_some() || filter.workflow_prefix.is_some());
            let sql = if by_workflow {
                &self.store.sql.list_runs_by_workflow
            } else {
                &self.store.sql.list_runs
            };
            let statement = self.store.prep.on(&mut client, sql).await?;
            let limit = i64::from(filter.page_size());
            let (before, parent, after) = (
                filter.before.map(|id| id.0),
                filter.parent.map(|id| id.0),
                filter.after.map(|id| id.0),
            );
            let (now, lost_ms) = (self.store.clock.now(), filter.lost_ms());
            let status = filter.status.map(RunStatus::as_str);
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
                &filter.workflow,
                &status,
                &limit,
                &before,
                &filter.created_after,
                &filter.created_before,
                &now,
                &lost_ms,
                &filter.workflow_prefix,
                &filter.top_level,
                &parent,
                &filter.idempotency_key,
                &filter.input_path,
                &after,
                &RunFilter::INPUT_SCAN,
            ];
            if by_workflow {
                params.push(&Self::WORKFLOWS_MAX);
            }
            statement.query(&*client, &params).await
        }
        .await;
        client.finish();
        rows?.iter().map(run_summary).collect()
    }
}

/// Whether PostgreSQL reads `path` as an SQL/JSON path: one unnamed round
/// trip that touches no table (safe through a transaction-mode pooler), so a
/// bad path is named instead of failing the list.
pub(crate) async fn check_input_path(
    client: &tokio_postgres::Client,
    path: &str,
) -> Result<(), Error> {
    let checked = client
        .query_typed(
            "SELECT $1::jsonpath::text",
            &[(&path, tokio_postgres::types::Type::TEXT)],
        )
        .await;
    match checked {
        Ok(_) => Ok(()),
        Err(error)
            if error.as_db_error().is_some_and(|db| {
                db.code().code().starts_with("42") || db.code().code().starts_with("22")
            }) =>
        {
            Err(Error::InvalidInputPath {
                path: path.to_owned(),
                reason: error
                    .as_db_error()
                    .map(|db| db.message().to_owned())
                    .unwrap_or_default(),
            })
        }
        Err(error) => Err(error.into()),
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
        unrunnable: missing(row)?,
        parent_run: row.get::<_, Option<i64>>("parent_run").map(RunId),
        children: row.get("children"),
    })
}

/// The `unrunnable` column of `list_runs.sql` and `get_run.sql`.
fn missing(row: &tokio_postgres::Row) -> Result<Option<Missing>, Error> {
    row.get::<_, Option<String>>("unrunnable")
        .map(|word| {
            Missing::parse(&word)
                .ok_or_else(|| Error::Corrupt(format!("what a due step lacks: `{word}`")))
        })
        .transpose()
}

/// A run's row as read by `get_run.sql`, without its lists.
fn run_view(row: &tokio_postgres::Row) -> Result<RunView, Error> {
    let run = run_summary(row)?;
    let parent_run_id = run.parent_run;
    let unrunnable = match (
        run.unrunnable,
        row.get::<_, Option<i64>>("unrunnable_step_id"),
        row.get::<_, Option<String>>("unrunnable_step"),
        row.get::<_, Option<String>>("unrunnable_queue"),
        row.get::<_, Option<chrono::DateTime<chrono::Utc>>>("unrunnable_since"),
    ) {
        (Some(missing), Some(step_id), Some(step), Some(queue), Some(since)) => Some(
            Unrunnable::new(step_id, run.workflow.clone(), step, queue, missing, since),
        ),
        _ => None,
    };
    Ok(RunView {
        run,
        definition_digest: row.get("definition_digest"),
        options_digest: row.get("options_digest"),
        step_plan: json(row, "step_plan")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::Corrupt(format!("column `step_plan`: {e}")))?,
        input: json(row, "input")?.unwrap_or(Value::Null),
        idempotency_key: row.get("idempotency_key"),
        concurrency_key: row.get("concurrency_key"),
        deadline_at: row.get("deadline_at"),
        error_class: row.get("error_class"),
        error_message: row.get("error_message"),
        paused_at: row.get("paused_at"),
        cancelled_at: row.get("cancelled_at"),
        steps: Vec::new(),
        events: Vec::new(),
        parent_batch_id: row.get("parent_batch_id"),
        parent_run_id,
        parent_step: row.get("parent_step"),
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
        unrunnable,
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
        scheduled_at: time(row, "scheduled_at")?,
        started_at: time(row, "started_at")?,
        finished_at: time(row, "finished_at")?,
        stall_at: time(row, "stall_at")?,
        worker_id: row.get("worker_id"),
        output: json(row, "output")?,
        error_class: row.get("error_class"),
        error_message: row.get("error_message"),
        error_causes: causes
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default(),
        waiting_for: row.get("waiting_for"),
        waiting_since: time(row, "waiting_since")?,
        held_by: row.get("held_by"),
        throttled_by: row.get("throttled_by"),
        created_at: time(row, "created_at")?,
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
fn batch_view(row: &tokio_postgres::Row) -> Result<BatchView, Error> {
    Ok(BatchView {
        id: row.get("id"),
        parent_step_id: row.get("parent_step_id"),
        total: row.get("total"),
        finished: row.get("succeeded"),
        cancelled: row.get("failed"),
        status: parse_stored::<BatchStatus>(&row.get::<_, String>("status"))?,
        created_at: row.get("created_at"),
        resolved_at: row.get("resolved_at"),
        unrunnable_child: row.get::<_, Option<i64>>("unrunnable_child").map(RunId),
    })
}

/// A read-only transaction of one snapshot, for a read of several
/// statements that must agree with each other.
pub(super) fn snapshot(
    client: &mut deadpool_postgres::ClientWrapper,
) -> deadpool_postgres::TransactionBuilder<'_> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
}

/// A time column, or a typed error when the driver cannot read it back:
/// never a panic.
fn time<T>(row: &tokio_postgres::Row, column: &str) -> Result<T, Error>
where
    T: for<'a> tokio_postgres::types::FromSql<'a>,
{
    // A time the driver cannot read (`infinity`, written by hand: the
    // engine never writes one) is a corrupt row, said as such, not a panic.
    row.try_get::<_, T>(column).map_err(|e| {
        Error::Corrupt(format!(
            "column `{column}`: {}",
            crate::error::display_chain(&e)
        ))
    })
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
