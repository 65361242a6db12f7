//! The pre-deploy check's reads: the runs in flight per position, and the live
//! registry.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::instrument;

use super::Client;
use crate::deploy::{Definitions, DeployReport, LiveDefinition, MAX_DEPLOY_POSITIONS, Position};
use crate::engine::{InFlight, LatestRow, RunStatus, StepStatus};
use crate::error::Error;
use crate::pg::store::parse_stored;

/// The most rows of the live registry the check reads (workflow and digest
/// pairs).
const MAX_LIVE_DEFINITIONS: i64 = 10_000;

impl Client {
    /// What `definitions` (a worker's [`Definitions`], e.g. the file a
    /// `--print-definitions` hook wrote) would do to the runs in flight of
    /// its workflows once its workers have replaced every live worker of
    /// them: per workflow and digest, how many runs advance, skip a
    /// gravestone, miss a step the new version added, pause with
    /// `StepNotDefined` or wait (see
    /// [`engine::deploy_verdict`](crate::engine::deploy_verdict)). Also lists
    /// the definitions live workers (a heartbeat within
    /// `lost_worker_threshold`) registered now.
    ///
    /// Two statements: runs in flight are counted per position in SQL (never
    /// read one by one), at most [`MAX_DEPLOY_POSITIONS`] positions
    /// ([`DeployReport::truncated`] past it); the database's statement
    /// timeout, if set, bounds them.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for a row this version cannot read.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn deploy_check(
        &self,
        definitions: &Definitions,
        lost_worker_threshold: Duration,
    ) -> Result<DeployReport, Error> {
        let workflows: Vec<&str> = definitions
            .definitions
            .iter()
            .map(|d| d.workflow.as_str())
            .collect();
        let limit = i64::try_from(MAX_DEPLOY_POSITIONS + 1).unwrap_or(i64::MAX);
        let lost_ms = crate::worker::capped_ms(lost_worker_threshold);

        let mut client = self.store.guarded().await?;
        let positions = self
            .store
            .prep
            .on(&mut client, &self.store.sql.deploy_positions)
            .await?;
        let rows = positions.query(&*client, &[&workflows, &limit]).await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => {
                client.finish();
                return Err(error);
            }
        };
        let live = self
            .store
            .prep
            .on(&mut client, &self.store.sql.live_definitions)
            .await?;
        let live_rows = live
            .query(
                &*client,
                &[&self.store.clock.now(), &lost_ms, &MAX_LIVE_DEFINITIONS],
            )
            .await;
        client.finish();

        let truncated = rows.len() > MAX_DEPLOY_POSITIONS;
        let positions = rows
            .iter()
            .take(MAX_DEPLOY_POSITIONS)
            .map(position)
            .collect::<Result<Vec<_>, _>>()?;
        let live: Vec<LiveDefinition> = live_rows?
            .iter()
            .map(|row| LiveDefinition {
                workflow: row.get("workflow"),
                digest: row.get("digest"),
                workers: row.get("workers"),
            })
            .collect();
        Ok(DeployReport::build(
            definitions,
            &positions,
            &live,
            truncated,
        ))
    }
}

/// A row of `deploy_positions.sql`.
fn position(row: &tokio_postgres::Row) -> Result<Position, Error> {
    let step_status: Option<String> = row.get("step_status");
    let latest = match (row.get::<_, Option<String>>("step_name"), step_status) {
        (Some(step_name), Some(status)) => Some(LatestRow {
            step_name,
            status: parse_stored::<StepStatus>(&status)?,
            queue: row.get("queue"),
            waiting_for: row.get("waiting_for"),
        }),
        _ => None,
    };
    Ok(Position {
        workflow: row.get("workflow"),
        digest: row.get("definition_digest"),
        runs: row.get("runs"),
        run: InFlight {
            status: parse_stored::<RunStatus>(&row.get::<_, String>("status"))?,
            current_step: row.get("current_step"),
            step_names: row.get("step_names"),
            step_plan: typed(row, "step_plan")?,
            version_plan: typed(row, "version_plan")?,
            latest,
        },
    })
}

/// A JSON column read as `T`, or a typed error.
fn typed<T: DeserializeOwned>(row: &tokio_postgres::Row, column: &str) -> Result<Option<T>, Error> {
    let value: Option<Value> = row.try_get(column).map_err(|e| {
        Error::Corrupt(format!(
            "column `{column}`: {}",
            crate::error::display_chain(&e)
        ))
    })?;
    value
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Error::Corrupt(format!("column `{column}`: {e}")))
}
