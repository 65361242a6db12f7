//! The operator's reads beside runs: workflow names, bounded counts, the
//! overview, the newest activity and a replica's lag.

use chrono::{DateTime, Utc};
use tracing::instrument;

use super::Client;
use crate::definition::SlotHolder;
use crate::engine::RunStatus;
use crate::error::Error;
use crate::view::{
    ConcurrencyNow, KeyNow, LimitsNow, MinuteCounts, Overview, QueueNow, RateNow, ReplicaLag,
    RunCount, RunFilter, WorkflowNow,
};

impl Client {
    /// The most names [`Client::workflows`] returns.
    pub const WORKFLOWS_MAX: i64 = 1_000;

    /// The workflow names the schema knows, sorted bytewise: those of its
    /// runs and those workers registered, at most
    /// [`Client::WORKFLOWS_MAX`]. What a workflow filter offers. One index
    /// probe per name, whatever the number of runs.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn workflows(&self) -> Result<Vec<String>, Error> {
        let mut client = self.store.guarded().await?;
        let rows = async {
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.workflows)
                .await?;
            statement.query(&*client, &[&Self::WORKFLOWS_MAX]).await
        }
        .await;
        client.finish();
        Ok(rows?.iter().map(|row| row.get("name")).collect())
    }

    /// How many runs `filter` keeps, every page of it (its `limit` does not
    /// count; `before` and `after` bound it as ids), counted up to `cap`
    /// (1 to [`RunCount::MAX_CAP`], 100,000): at most `cap + 1` runs are
    /// read, or [`RunFilter::INPUT_SCAN`] with an input path. What a bulk
    /// action's confirmation says.
    ///
    /// # Errors
    /// [`Error::InvalidInputPath`]; database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn count_runs(&self, filter: &RunFilter, cap: u32) -> Result<RunCount, Error> {
        let cap = cap.clamp(1, RunCount::MAX_CAP);
        let mut client = self.store.guarded().await?;
        let row = async {
            if let Some(path) = &filter.input_path {
                super::reads::check_input_path(&client, path).await?;
            }
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.count_runs)
                .await?;
            statement
                .query_one(
                    &*client,
                    &[
                        &filter.workflow,
                        &filter.status.map(RunStatus::as_str),
                        &(i64::from(cap) + 1),
                        &filter.before.map(|id| id.0),
                        &filter.created_after,
                        &filter.created_before,
                        &filter.workflow_prefix,
                        &filter.top_level,
                        &filter.parent.map(|id| id.0),
                        &filter.idempotency_key,
                        &filter.input_path,
                        &filter.after.map(|id| id.0),
                        &RunFilter::INPUT_SCAN,
                    ],
                )
                .await
        }
        .await;
        client.finish();
        let row = row?;
        Ok(RunCount::of(
            row.get("scanned"),
            row.get("matched"),
            cap,
            filter.input_path.is_some(),
        ))
    }

    /// Runs and queues now, and the last hour (see [`Overview`]), read in
    /// one snapshot: per workflow its runs not ended by status, per queue
    /// its due, held and running steps and its oldest due time, the
    /// failures and pauses of the last hour and its runs ended per minute.
    /// The workflows are those with runs not ended, found from the runs in
    /// each such status, never from the names of every run (see
    /// [`Overview::workflows_cut`]).
    /// Every part reads a partial index (`runs_workflow_status`, `runs_status_updated`,
    /// `steps_due_or_waiting`, `steps_held`, `steps_in_progress`,
    /// `runs_ended`, `events_paused`, `runs_paused`) and stops at
    /// [`Overview::COUNT_CAP`] rows, so it costs the same on a schema of
    /// any age. Times are the store's.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn overview(&self) -> Result<Overview, Error> {
        let now = self.store.clock.now();
        let mut guarded = self.store.guarded().await?;
        let read = async {
            let client = super::reads::snapshot(&mut guarded).start().await?;
            let (sql, prep) = (&self.store.sql, &self.store.prep);
            let at = read_now(&client, now).await?;
            let at_param = Some(at);
            let cap = Overview::COUNT_CAP;
            let statement = prep.in_driver_tx(&client, &sql.overview_workflows).await?;
            let rows = statement
                .query(&client, &[&Overview::WORKFLOWS, &cap])
                .await?;
            let workflows_cut = rows.iter().any(|row| row.get::<_, bool>("cut"));
            let workflows = rows
                .iter()
                .map(|row| {
                    WorkflowNow::new(
                        row.get("workflow"),
                        row.get("ready"),
                        row.get("performing"),
                        row.get("paused"),
                    )
                })
                .filter(|w| w.ready + w.performing + w.paused > 0)
                .collect();
            let statement = prep.in_driver_tx(&client, &sql.overview_queues).await?;
            let queues = statement
                .query(&client, &[&at_param, &cap])
                .await?
                .iter()
                .map(|row| {
                    QueueNow::new(
                        row.get("queue"),
                        row.get("due"),
                        row.get("oldest_due"),
                        row.get("held"),
                        row.get("in_flight"),
                    )
                })
                .collect();
            let statement = prep.in_driver_tx(&client, &sql.overview_hour).await?;
            let mut minutes = Vec::new();
            let (mut cancelled, mut failed, mut pauses) = (0, 0, 0);
            for row in statement.query(&client, &[&at_param, &cap]).await? {
                let minute: Option<DateTime<Utc>> = row.get("minute");
                match minute {
                    Some(minute) => {
                        let counts = MinuteCounts::new(
                            minute,
                            row.get("finished"),
                            row.get("cancelled"),
                            row.get("paused"),
                        );
                        cancelled += counts.cancelled;
                        pauses += counts.paused;
                        minutes.push(counts);
                    }
                    None => failed = row.get("paused"),
                }
            }
            client.commit().await?;
            Ok(
                Overview::new(at, workflows, queues, (cancelled, failed, pauses), minutes)
                    .with_workflows_cut(workflows_cut),
            )
        }
        .await;
        guarded.finish();
        read
    }

    /// The flow limits in force and what each holds now (see
    /// [`LimitsNow`]), read in one snapshot: the concurrency limits and
    /// rate limits workers registered, per concurrency key the slots held
    /// and the rows held back, per rate of one window its starts inside
    /// the window ending now. Each part stops at its bound (a limit's rows,
    /// [`LimitsNow::COUNT_CAP`] rows per count through the partial indexes
    /// flow control keeps), so it costs the same on a schema of any age.
    /// Times are the store's.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for a stored holder it does not
    /// know.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn limits(&self) -> Result<LimitsNow, Error> {
        let now = self.store.clock.now();
        let mut guarded = self.store.guarded().await?;
        let read = async {
            let client = super::reads::snapshot(&mut guarded).start().await?;
            let (sql, prep) = (&self.store.sql, &self.store.prep);
            let at = read_now(&client, now).await?;
            let statement = prep.in_driver_tx(&client, &sql.limits_in_force).await?;
            let concurrency = statement
                .query(&client, &[&LimitsNow::LIMITS_MAX])
                .await?
                .iter()
                .map(|row| {
                    let holder: String = row.get("holder");
                    Ok(ConcurrencyNow::new(
                        row.get("key"),
                        row.get("workflow"),
                        row.get("max_in_flight"),
                        SlotHolder::parse(&holder).ok_or_else(|| {
                            Error::Corrupt(format!("unknown slot holder {holder:?}"))
                        })?,
                    ))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let statement = prep.in_driver_tx(&client, &sql.limit_keys).await?;
            let keys = statement
                .query(&client, &[&LimitsNow::COUNT_CAP, &LimitsNow::KEYS_MAX])
                .await?
                .iter()
                .map(|row| {
                    KeyNow::new(
                        row.get("key"),
                        row.get("limit_key"),
                        row.get("in_flight"),
                        row.get("held"),
                    )
                })
                .collect();
            let statement = prep.in_driver_tx(&client, &sql.rates_in_force).await?;
            let rates = statement
                .query(&client, &[&Some(at), &LimitsNow::LIMITS_MAX])
                .await?
                .iter()
                .map(|row| {
                    RateNow::new(
                        row.get("key"),
                        row.get("workflow"),
                        (row.get("max_starts"), row.get("period_ms")),
                        row.get("starts_in_window"),
                    )
                })
                .collect();
            client.commit().await?;
            Ok(LimitsNow::new(at, concurrency, keys, rates))
        }
        .await;
        guarded.finish();
        read
    }

    /// When the newest run was created (`None`: no run yet): where an
    /// insights window that fits the data ends, so a quiet schema shows its
    /// last busy day instead of an empty one. One index probe.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn newest_activity(&self) -> Result<Option<DateTime<Utc>>, Error> {
        let mut client = self.store.guarded().await?;
        let rows = async {
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.newest_activity)
                .await?;
            statement.query(&*client, &[]).await
        }
        .await;
        client.finish();
        Ok(rows?.first().map(|row| row.get("created_at")))
    }

    /// How far behind its primary the database this client reads is:
    /// `now() - pg_last_xact_replay_timestamp()` on a server in recovery,
    /// [`ReplicaLag::NotAReplica`] on one that is not. One statement that
    /// reads no table.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn replica_lag(&self) -> Result<ReplicaLag, Error> {
        let client = self.store.guarded().await?;
        let row = client
            .query_typed(
                "SELECT pg_is_in_recovery() AS replica, \
                 (extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::bigint AS lag_ms",
                &[],
            )
            .await;
        client.finish();
        let row = row?;
        let row = row
            .first()
            .ok_or_else(|| Error::Corrupt("no row".to_owned()))?;
        Ok(
            match (
                row.get::<_, bool>("replica"),
                row.get::<_, Option<i64>>("lag_ms"),
            ) {
                (false, _) => ReplicaLag::NotAReplica,
                (true, None) => ReplicaLag::NothingReplayed,
                (true, Some(ms)) => ReplicaLag::Behind { ms: ms.max(0) },
            },
        )
    }
}

/// The time a read of several statements is as of: the store's pinned
/// clock, or the server's once, so every part of the read agrees.
async fn read_now(
    client: &deadpool_postgres::Transaction<'_>,
    now: Option<DateTime<Utc>>,
) -> Result<DateTime<Utc>, Error> {
    Ok(match now {
        Some(now) => now,
        None => client
            .query_one("SELECT clock_timestamp()", &[])
            .await?
            .get(0),
    })
}
