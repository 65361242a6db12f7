//! The registry as an operator reads it: live workers and what they run.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::instrument;

use super::Client;
use crate::error::Error;

/// A live worker as the registry holds it (`Client::workers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WorkerView {
    /// The id written on the rows it claims.
    pub id: String,
    /// Its stable name (`WorkerBuilder::name`); `None` for a worker of a
    /// version before the registry.
    pub name: Option<String>,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: i32,
    /// The queues it claims from.
    pub queues: Vec<String>,
    /// How many bodies it runs at once; `None` for a worker of a version
    /// before the registry.
    pub concurrency: Option<i32>,
    /// The definitions it registered, by workflow name.
    pub workflows: Vec<RegisteredWorkflow>,
    /// Attempts in progress under its id.
    pub in_flight: i64,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// How long ago that was, on the database's clock (never negative).
    pub heartbeat_age: Duration,
}

/// One workflow a worker registered, with the digests of its definition and
/// the per-deployment overrides it runs it with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RegisteredWorkflow {
    /// The workflow's name.
    pub workflow: String,
    /// Its definition digest (SHA-256, lowercase hex).
    pub digest: String,
    /// The options digest of the definition in force (overrides included);
    /// `None` for a worker of a version before the SQL entry point.
    #[serde(default)]
    pub options_digest: Option<String>,
    /// The per-deployment overrides in force
    /// ([`WorkflowDefinition::overrides_in_force`](crate::WorkflowDefinition::overrides_in_force)):
    /// `None` when the worker runs the workflow as its source declares (or
    /// is of a version before overrides).
    #[serde(default)]
    pub overrides: Option<serde_json::Value>,
}

impl RegisteredWorkflow {
    /// What a worker of `definition` records for it: for a store outside
    /// this crate (the testkit's memory store) answering as the registry
    /// does.
    #[must_use]
    pub fn of(definition: &crate::WorkflowDefinition) -> Self {
        Self {
            workflow: definition.name.to_owned(),
            digest: definition.digest.to_owned(),
            options_digest: Some(definition.options_digest.to_owned()),
            overrides: definition.overrides_in_force(),
        }
    }
}

impl Client {
    /// The live workers (a heartbeat within `lost_worker_threshold`), by name,
    /// at most `limit` of them, each with what it registered and its
    /// attempts in progress.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for a registry row this version
    /// cannot read.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn workers(
        &self,
        lost_worker_threshold: Duration,
        limit: usize,
    ) -> Result<Vec<WorkerView>, Error> {
        let mut client = self.store.guarded().await?;
        let statement = self
            .store
            .prep
            .on(&mut client, &self.store.sql.list_workers)
            .await?;
        let lost_ms = crate::worker::capped_ms(lost_worker_threshold);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement
            .query(&*client, &[&self.store.clock.now(), &lost_ms, &limit])
            .await;
        client.finish();
        rows?.iter().map(worker_view).collect()
    }
}

fn worker_view(row: &tokio_postgres::Row) -> Result<WorkerView, Error> {
    let workflows: Vec<RegisteredWorkflow> =
        serde_json::from_value(row.get("workflows")).map_err(|e| Error::Corrupt(e.to_string()))?;
    let now: DateTime<Utc> = row.get("now");
    let heartbeat_at: DateTime<Utc> = row.get("heartbeat_at");
    Ok(WorkerView {
        id: row.get("id"),
        name: row.get("name"),
        host: row.get("host"),
        pid: row.get("pid"),
        queues: row.get("queues"),
        concurrency: row.get("concurrency"),
        workflows,
        in_flight: row.get("in_flight"),
        started_at: row.get("started_at"),
        heartbeat_at,
        heartbeat_age: (now - heartbeat_at).to_std().unwrap_or_default(),
    })
}
