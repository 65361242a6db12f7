//! The sweep's and the workers' upkeep: stalled attempts, heartbeats, orphans, retention, worker rows, batches and status counts.

use super::claim::claim_of_step_row;
use super::{PgStore, check_count};
use crate::error::Error;
use crate::store::{Claim, Registration, registered_plan};

impl PgStore {
    /// Attempts the sweep should repair: in progress past their `stall_at`
    /// (`timeout`), or claimed by a worker whose row is gone or whose heartbeat is
    /// older than `lost_ms` (`worker_lost`). `(claim, worker id, detection)`.
    pub(crate) async fn stalled(
        &self,
        lost_ms: i64,
        limit: i64,
    ) -> Result<Vec<(Claim, String, String)>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.stalled).await?;
        let rows = statement
            .query(&client, &[&self.clock.now(), &lost_ms, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    claim_of_step_row(row),
                    row.get("worker_id"),
                    row.get("detection"),
                )
            })
            .collect())
    }

    /// Refreshes a worker's heartbeat. Returns whether its row was there, which
    /// of `running` (step ids) lost their claim, and which attempts in progress
    /// under this worker `running` lacks.
    pub(crate) async fn heartbeat(&self, id: &str, running: &[i64]) -> Result<Heartbeat, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.heartbeat).await?;
        let row = statement
            .query_one(&client, &[&id, &self.clock.now(), &running])
            .await?;
        Ok(Heartbeat {
            present: row.get::<_, i64>("beats") > 0,
            lost: row.get("lost"),
            orphans: row.get("orphans"),
        })
    }

    /// Makes attempts a worker holds but lost track of due for the sweep now.
    /// Returns how many.
    pub(crate) async fn release_orphans(&self, id: &str, orphans: &[i64]) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.release_orphans).await?;
        statement
            .execute(&client, &[&id, &orphans, &self.clock.now()])
            .await
    }

    /// Deletes up to `batch` finished or cancelled runs older than `retention_ms`;
    /// returns how many.
    pub(crate) async fn delete_expired_runs(
        &self,
        retention_ms: i64,
        batch: i64,
    ) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self
            .prep
            .on(&mut client, &self.sql.delete_expired_runs)
            .await?;
        statement
            .execute(&client, &[&self.clock.now(), &retention_ms, &batch])
            .await
    }

    /// Deletes the row of worker `id` and of every worker silent for longer than
    /// `silent_ms` (each if given); returns how many.
    pub(crate) async fn delete_workers(
        &self,
        id: Option<&str>,
        silent_ms: Option<i64>,
    ) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.delete_worker).await?;
        statement
            .execute(&client, &[&id, &self.clock.now(), &silent_ms])
            .await
    }

    /// For the sweep: resolves up to `limit` open batches whose children all
    /// ended, waking their parents' parked steps. Returns how many.
    /// Runs per status, for the statuses that are not an end (ready,
    /// performing, paused); statuses without runs are absent.
    pub(crate) async fn run_status_counts(&self) -> Result<Vec<(String, i64)>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self
            .prep
            .on(&mut client, &self.sql.run_status_counts)
            .await?;
        Ok(statement
            .query(&client, &[])
            .await?
            .iter()
            .map(|row| (row.get("status"), row.get("runs")))
            .collect())
    }

    pub(crate) async fn resolve_batches(&self, limit: i64) -> Result<u64, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.resolve_batches).await?;
        let row = statement
            .query_one(
                &client,
                &[&self.clock.now(), &limit, &self.schema.channel()],
            )
            .await?;
        Ok(u64::try_from(row.get::<_, i64>("resolved")).unwrap_or(0))
    }

    /// Records a worker in the registry (`register_worker.sql`): its row, the
    /// definitions it runs and its links to them, and the flow limits its
    /// definitions and queue limits declare.
    pub(crate) async fn register_worker(
        &self,
        registration: &Registration<'_>,
    ) -> Result<(), Error> {
        let definitions: Vec<serde_json::Value> = registration
            .definitions
            .iter()
            .map(|definition| {
                Ok(serde_json::json!({
                    "workflow": definition.name,
                    "digest": definition.digest,
                    "step_plan": registered_plan(definition),
                    "options_digest": definition.options_digest,
                    "start_plan": serde_json::to_value(crate::engine::step_plan(definition))?,
                    "overrides": definition.overrides_in_force(),
                }))
            })
            .collect::<Result<_, Error>>()?;
        let definitions = serde_json::Value::Array(definitions);
        let (limits, rates) =
            super::flow::declared_limits(registration.definitions, registration.queue_limits);
        let concurrency = i32::try_from(registration.concurrency).unwrap_or(i32::MAX);
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.register_worker).await?;
        let row = statement
            .query_one(
                &client,
                &[
                    &registration.worker_id,
                    &registration.host,
                    &registration.pid,
                    &registration.queues,
                    &self.clock.now(),
                    &registration.name,
                    &concurrency,
                    &definitions,
                    &limits,
                    &rates,
                    &self.schema.channel(),
                ],
            )
            .await?;
        check_count("register_worker: worker row", 1, row.get("workers"))?;
        check_count(
            "register_worker: definition links",
            row.get("given"),
            row.get("links"),
        )
    }

    /// Due rows the sweep's grace rule pauses (`undefined_steps.sql`).
    pub(crate) async fn undefined_steps(
        &self,
        grace_ms: i64,
        lost_ms: i64,
        limit: i64,
    ) -> Result<Vec<Claim>, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.undefined_steps).await?;
        let rows = statement
            .query(&client, &[&self.clock.now(), &grace_ms, &lost_ms, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|row| Claim {
                waiting_since: row.get("waiting_since"),
                ..claim_of_step_row(row)
            })
            .collect())
    }
}

/// What a heartbeat learned.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    /// The worker row was there.
    pub(crate) present: bool,
    /// Attempts it runs whose claim is gone.
    pub(crate) lost: Vec<i64>,
    /// Attempts in progress under its id that it does not run.
    pub(crate) orphans: Vec<i64>,
}
