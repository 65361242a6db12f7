//! Counts and timings over a time range, for the dashboard's insights and
//! `pgbus stats`: bounded reads, each saying how much of the range it read.

use chrono::{DateTime, Utc};
use tracing::instrument;

use super::Client;
use crate::engine::StepOutcome;
use crate::error::Error;
use crate::pg::store::parse_stored;
use crate::window::Range;

/// What the insights reads count: runs of some workflows, and how many rows
/// each read takes at most. `InsightsFilter::new().workflow_prefix("billing.")`,
/// or set the fields of an `InsightsFilter::default()`.
///
/// No index reads runs or steps by time but the ones each read names (none
/// on `steps`, which every step writes), so every read takes the newest rows
/// of the range, at most [`InsightsFilter::cap`] of them, and says when the
/// range held more ([`Coverage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InsightsFilter {
    /// Only runs and attempts of workflows whose name starts with this text
    /// (compared byte for byte; no wildcards; `None` or empty: every
    /// workflow). The filter applies to the rows read: a read that stops at
    /// its cap has read that many rows of every workflow.
    pub workflow_prefix: Option<String>,
    /// The most rows each part of a read takes (`None`:
    /// [`InsightsFilter::DEFAULT_CAP`]; clamped to 1 to
    /// [`InsightsFilter::MAX_CAP`]).
    pub cap: Option<u32>,
}

impl InsightsFilter {
    /// The most rows each part of a read takes when none is given: 30,000.
    /// Measured on the benchmark's million runs and five million attempts
    /// (BENCHMARKS.md, "Dashboard pages"): a page of the three reads took
    /// 60 to 90 ms at 30,000, 100 ms at 50,000, 200 to 300 ms at 100,000 on
    /// two shared cores; 30,000 leaves the 200 ms budget room for a busy
    /// machine. Each row is about a microsecond (a heap row read in order);
    /// the slowest steps' percentiles sort what they read.
    pub const DEFAULT_CAP: u32 = 30_000;

    /// The largest cap: 1,000,000.
    pub const MAX_CAP: u32 = 1_000_000;

    /// Every workflow, the default cap.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Only workflows whose name starts with `prefix`.
    #[must_use]
    pub fn workflow_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.workflow_prefix = Some(prefix.into());
        self
    }

    /// At most `cap` rows a part (clamped to 1 to [`InsightsFilter::MAX_CAP`]).
    #[must_use]
    pub const fn cap(mut self, cap: u32) -> Self {
        self.cap = Some(cap);
        self
    }

    /// The cap in force.
    #[must_use]
    pub fn effective_cap(&self) -> u32 {
        self.cap
            .unwrap_or(Self::DEFAULT_CAP)
            .clamp(1, Self::MAX_CAP)
    }

    /// The most pauses [`Client::run_counts`] reads: the cap, or with a
    /// workflow prefix a tenth of it (at least 1). Without a prefix the
    /// pauses are counted from their index alone; with one, each pause's
    /// event and run are read too, and a pause event is rare among a run's
    /// events, so each is a page of its own: about ten times the cost of a
    /// row of the other parts (measured on the benchmark's data).
    #[must_use]
    pub fn pause_cap(&self) -> u32 {
        let cap = self.effective_cap();
        if self.prefix().is_some() {
            (cap / 10).max(1)
        } else {
            cap
        }
    }

    /// The prefix bound to the SQL: `None` for any workflow.
    fn prefix(&self) -> Option<&str> {
        self.workflow_prefix.as_deref().filter(|p| !p.is_empty())
    }
}

/// How much of a range a capped read covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Coverage {
    /// The most rows the read takes ([`InsightsFilter::cap`]).
    pub cap: u32,
    /// How many it read (at most `cap`), of every workflow.
    pub read: i64,
    /// The oldest time among the rows read (`None`: it read none): what the
    /// read is ordered by (a run's creation, its end, a pause, an attempt's
    /// creation).
    pub oldest_read: Option<DateTime<Utc>>,
    /// Whether the range holds rows older than those read: the read
    /// stopped at `cap`, and its counts leave out everything before
    /// `oldest_read`.
    pub partial: bool,
}

impl Coverage {
    /// Whether the counts of the time from `start` on are whole: the read
    /// was not partial, or it read back past `start`.
    #[must_use]
    pub fn whole_from(&self, start: DateTime<Utc>) -> bool {
        !self.partial || self.oldest_read.is_some_and(|oldest| oldest < start)
    }

    fn from_row(row: &tokio_postgres::Row, cap: u32) -> Self {
        Self {
            cap,
            read: row.get("read"),
            oldest_read: row.get("oldest"),
            partial: row.get("partial"),
        }
    }

    const fn none(cap: u32) -> Self {
        Self {
            cap,
            read: 0,
            oldest_read: None,
            partial: false,
        }
    }
}

/// Runs per bucket of a range and how much of the range each part read
/// (see [`Client::run_counts`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct RunActivity {
    /// Every bucket of the range, oldest first (zeros where nothing was
    /// counted).
    pub buckets: Vec<BucketCounts>,
    /// The runs started: read by id, the newest first.
    pub started: Coverage,
    /// The runs finished and cancelled: read by the time they ended, the
    /// newest first.
    pub ended: Coverage,
    /// The pauses: read by time, the newest first, at most
    /// [`InsightsFilter::pause_cap`].
    pub paused: Coverage,
}

/// Step attempts per bucket and outcome over a range (see
/// [`Client::step_outcomes`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct StepOutcomes {
    /// Per bucket, outcome and failure, oldest bucket first; buckets and
    /// outcomes without attempts are absent.
    pub counts: Vec<OutcomeCount>,
    /// The attempts read: by id, the newest first.
    pub coverage: Coverage,
}

/// The slowest steps over a range (see [`Client::slowest_steps`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct SlowestSteps {
    /// Slowest first.
    pub steps: Vec<StepTimings>,
    /// The attempts read: by id, the newest first.
    pub coverage: Coverage,
}

impl Client {
    /// Runs started, finished, paused and cancelled in each bucket of
    /// `range` (a [`Window`](crate::window::Window) placed in time), runs
    /// started, finished and cancelled also counted for fan-out children
    /// alone, of the workflows `filter` keeps. Times are the database's.
    ///
    /// A bounded read whatever the range: each part reads at most
    /// `filter`'s cap of rows ([`InsightsFilter::pause_cap`] for pauses),
    /// the newest first, and says in its [`Coverage`] whether the range
    /// held more. Runs started are read by primary key down to the first
    /// run created in the range (ids grow with creation time; a binary
    /// search of the key finds it, at most 64 probes; a run whose creation
    /// time is out of id order may be missed), runs ended through
    /// `runs_ended`, pauses through `events_paused`. No index was added
    /// for these reads.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn run_counts(
        &self,
        range: &Range,
        filter: &InsightsFilter,
    ) -> Result<RunActivity, Error> {
        let cap = filter.effective_cap();
        let pause_cap = filter.pause_cap();
        let mut client = self.store.guarded().await?;
        let rows = async {
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.run_counts)
                .await?;
            statement
                .query(
                    &*client,
                    &[
                        &range.from,
                        &range.to,
                        &bucket_ms(range),
                        &filter.prefix(),
                        &i64::from(cap),
                        &i64::from(pause_cap),
                    ],
                )
                .await
        }
        .await;
        client.finish();
        let rows = rows?;
        let mut found: std::collections::HashMap<DateTime<Utc>, BucketCounts> =
            std::collections::HashMap::new();
        let (mut started, mut ended, mut paused) = (
            Coverage::none(cap),
            Coverage::none(cap),
            Coverage::none(pause_cap),
        );
        for row in &rows {
            let part: &str = row.get("part");
            if row.get::<_, bool>("total") {
                match part {
                    "started" => started = Coverage::from_row(row, cap),
                    "ended" => ended = Coverage::from_row(row, cap),
                    _ => paused = Coverage::from_row(row, pause_cap),
                }
                continue;
            }
            let bucket: DateTime<Utc> = row.get("bucket");
            let counts = found
                .entry(bucket)
                .or_insert_with(|| BucketCounts::zero(bucket));
            let (a, a_children): (i64, i64) = (row.get("a"), row.get("a_children"));
            let (b, b_children): (i64, i64) = (row.get("b"), row.get("b_children"));
            match part {
                "started" => {
                    counts.started = a;
                    counts.children.started = a_children;
                }
                "ended" => {
                    counts.finished = a;
                    counts.children.finished = a_children;
                    counts.cancelled = b;
                    counts.children.cancelled = b_children;
                }
                _ => counts.paused = a,
            }
        }
        let buckets = range
            .buckets()
            .into_iter()
            .map(|bucket| {
                found
                    .get(&bucket)
                    .copied()
                    .unwrap_or_else(|| BucketCounts::zero(bucket))
            })
            .collect();
        Ok(RunActivity {
            buckets,
            started,
            ended,
            paused,
        })
    }

    /// Step attempts that ended in each bucket of `range`, per outcome and
    /// whether they failed ([`OutcomeCount::failed`]), of the workflows
    /// `filter` keeps, oldest bucket first; buckets and outcomes without
    /// attempts are absent.
    ///
    /// A bounded read whatever the range: the newest attempts by primary
    /// key (ids grow with creation time) created in the range, at most
    /// `filter`'s cap, and [`StepOutcomes::coverage`] says whether the
    /// range held more. An attempt created before the range that ended in
    /// it is not counted.
    ///
    /// # Errors
    /// Database errors; [`Error::Corrupt`] for an unknown stored outcome.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn step_outcomes(
        &self,
        range: &Range,
        filter: &InsightsFilter,
    ) -> Result<StepOutcomes, Error> {
        let cap = filter.effective_cap();
        let mut client = self.store.guarded().await?;
        let rows = async {
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.step_insights)
                .await?;
            statement
                .query(
                    &*client,
                    &[
                        &range.from,
                        &range.to,
                        &bucket_ms(range),
                        &filter.prefix(),
                        &i64::from(cap),
                    ],
                )
                .await
        }
        .await;
        client.finish();
        let mut coverage = Coverage::none(cap);
        let mut counts = Vec::new();
        for row in &rows? {
            if row.get::<_, &str>("part") == "read" {
                coverage = Coverage::from_row(row, cap);
            } else {
                counts.push(OutcomeCount {
                    bucket: row.get("bucket"),
                    outcome: parse_stored::<StepOutcome>(&row.get::<_, String>("outcome"))?,
                    failed: row.get("failed"),
                    steps: row.get("steps"),
                });
            }
        }
        Ok(StepOutcomes { counts, coverage })
    }

    /// The `limit` steps that ran longest on average among attempts that
    /// ended in `range`, of the workflows `filter` keeps, with their pickup
    /// latency, slowest first.
    ///
    /// The attempts read are those [`Client::step_outcomes`] reads: at most
    /// `filter`'s cap, so the percentiles sort at most that many whatever
    /// the range, and [`SlowestSteps::coverage`] says whether the range
    /// held more.
    ///
    /// # Errors
    /// Database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, err(level = "debug"))]
    pub async fn slowest_steps(
        &self,
        range: &Range,
        filter: &InsightsFilter,
        limit: i64,
    ) -> Result<SlowestSteps, Error> {
        let cap = filter.effective_cap();
        let mut client = self.store.guarded().await?;
        let rows = async {
            let statement = self
                .store
                .prep
                .on(&mut client, &self.store.sql.slowest_steps)
                .await?;
            statement
                .query(
                    &*client,
                    &[
                        &range.from,
                        &range.to,
                        &limit,
                        &filter.prefix(),
                        &i64::from(cap),
                    ],
                )
                .await
        }
        .await;
        client.finish();
        let mut coverage = Coverage::none(cap);
        let mut steps = Vec::new();
        for row in &rows? {
            if row.get::<_, &str>("part") == "read" {
                coverage = Coverage::from_row(row, cap);
            } else {
                steps.push(StepTimings {
                    workflow: row.get("workflow"),
                    step: row.get("step_name"),
                    attempts: row.get("attempts"),
                    mean_ms: row.get("mean_ms"),
                    max_ms: row.get("max_ms"),
                    pickup_p50_ms: row.get("pickup_p50_ms"),
                    pickup_p99_ms: row.get("pickup_p99_ms"),
                });
            }
        }
        // A union does not keep the order of its parts.
        steps.sort_by(|a, b| {
            b.mean_ms
                .total_cmp(&a.mean_ms)
                .then_with(|| a.workflow.cmp(&b.workflow))
                .then_with(|| a.step.cmp(&b.step))
        });
        Ok(SlowestSteps { steps, coverage })
    }
}

fn bucket_ms(range: &Range) -> i64 {
    i64::try_from(range.bucket.as_millis()).unwrap_or(i64::MAX)
}

/// Run counts of one time bucket (see [`Client::run_counts`]): every run,
/// fan-out children included; [`BucketCounts::children`] counts those
/// alone, and [`BucketCounts::top_level`] the rest (pauses not split).
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
    /// Of the runs started, finished and cancelled, the fan-out children's
    /// (runs with a parent batch). Pauses are not split: without a workflow
    /// filter they are counted from their index alone, which holds no run.
    pub children: Tally,
}

impl BucketCounts {
    const fn zero(bucket: DateTime<Utc>) -> Self {
        Self {
            bucket,
            started: 0,
            finished: 0,
            paused: 0,
            cancelled: 0,
            children: Tally {
                started: 0,
                finished: 0,
                cancelled: 0,
            },
        }
    }

    /// The counts of top-level runs alone (those no `fan_out` started).
    #[must_use]
    pub const fn top_level(&self) -> Tally {
        Tally {
            started: self.started - self.children.started,
            finished: self.finished - self.children.finished,
            cancelled: self.cancelled - self.children.cancelled,
        }
    }
}

/// A bucket's counts of one kind of run (see [`BucketCounts::children`]
/// and [`BucketCounts::top_level`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Tally {
    /// Runs created.
    pub started: i64,
    /// Runs that finished.
    pub finished: i64,
    /// Runs cancelled.
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
    /// Whether they failed: the attempt's status is
    /// [`StepStatus::Failed`](crate::StepStatus::Failed), which an attempt
    /// that returned an error gets whatever followed (a reattempt, a
    /// pause, a skip or a cancel by its policy), and so does every
    /// reattempted one. Not failures: an operator's skip or cancel, a
    /// step's own `Pause`, `Cancel` or `Finish` without an error.
    pub failed: bool,
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
    /// Attempts that ended in the window (of those read).
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
