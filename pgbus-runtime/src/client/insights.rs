//! Counts and timings over a time range, for the dashboard's insights.

use chrono::{DateTime, Utc};
use tracing::instrument;

use super::Client;
use crate::engine::StepOutcome;
use crate::error::Error;
use crate::pg::store::parse_stored;
use crate::window::Range;

impl Client {
    /// Runs started, finished, paused and cancelled in each bucket of
    /// `range` (a [`Window`](crate::window::Window) placed in time), oldest
    /// first, every bucket present (zeros where nothing happened). Times are
    /// the database's.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
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
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
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
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
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
