//! What an operator's screens read beside runs: the workflow names, bounded
//! counts, the overview of now and the last hour, and how far a replica is
//! behind.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// How many runs a filter keeps, counted up to a cap (see
/// [`Client::count_runs`](crate::Client::count_runs)): what a bulk action's
/// confirmation says ("12 runs", "more than 10,000 runs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "runs")]
#[non_exhaustive]
pub enum RunCount {
    /// Exactly this many.
    Exactly(i64),
    /// More than this many (the cap): the count stopped there.
    MoreThan(i64),
    /// At least this many: a filter on the input tried its path on
    /// [`RunFilter::INPUT_SCAN`](crate::RunFilter::INPUT_SCAN) runs, and
    /// more were left untried.
    AtLeast(i64),
}

impl RunCount {
    /// The most a count goes to: a larger cap counts this far.
    pub const MAX_CAP: u32 = 100_000;

    /// The number counted (exact, or the floor).
    #[must_use]
    pub const fn runs(self) -> i64 {
        match self {
            Self::Exactly(n) | Self::MoreThan(n) | Self::AtLeast(n) => n,
        }
    }

    /// The count from what a store read: `scanned` runs kept by every
    /// filter but the input path, `matched` of them passing it too (equal
    /// without one), `cap` the most to say exactly, `input_path` whether the
    /// filter has one. The one rule both stores answer by.
    #[must_use]
    pub fn of(scanned: i64, matched: i64, cap: u32, input_path: bool) -> Self {
        let cap = i64::from(cap.clamp(1, Self::MAX_CAP));
        if matched > cap {
            Self::MoreThan(cap)
        } else if input_path && scanned >= crate::RunFilter::INPUT_SCAN {
            Self::AtLeast(matched)
        } else {
            Self::Exactly(matched)
        }
    }
}

impl std::fmt::Display for RunCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exactly(n) => write!(f, "{n}"),
            Self::MoreThan(n) => write!(f, "more than {n}"),
            Self::AtLeast(n) => write!(f, "at least {n}"),
        }
    }
}

/// What runs and queues look like now, and over the last hour (see
/// [`Client::overview`](crate::Client::overview)). Every count stops at
/// [`Overview::COUNT_CAP`] rows read: a value above it reads "more than
/// [`Overview::COUNT_CAP`]".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Overview {
    /// The store's time the overview was read at; the hour is the one
    /// before it.
    pub at: DateTime<Utc>,
    /// Per workflow with runs not ended, by name (bytewise), at most
    /// [`Overview::WORKFLOWS`]. Workflows whose runs have all ended are
    /// never read, however many there are.
    pub workflows: Vec<WorkflowNow>,
    /// Whether [`Overview::workflows`] may lack workflows with runs not
    /// ended: more than [`Overview::WORKFLOWS`] had some, or a status held
    /// more than [`Overview::COUNT_CAP`] runs (the names are read from at
    /// most that many runs per status).
    pub workflows_cut: bool,
    /// Per queue with due, held or running steps, by name (bytewise).
    pub queues: Vec<QueueNow>,
    /// Runs cancelled in the last hour.
    pub cancelled_last_hour: i64,
    /// Runs paused now whose pause came with a step error and began in the
    /// last hour.
    pub failed_pauses_last_hour: i64,
    /// Times a run paused in the last hour (every `paused` event: an
    /// operator's, a step's `Pause`, a policy's, a stall's).
    pub pauses_last_hour: i64,
    /// The last hour per minute, oldest first, minutes with nothing absent.
    pub minutes: Vec<MinuteCounts>,
}

impl Overview {
    /// The most rows any one count of an overview reads.
    pub const COUNT_CAP: i64 = 10_000;

    /// The most workflows an overview lists.
    pub const WORKFLOWS: i64 = 1_000;

    /// Failures in the last hour: runs cancelled, and runs paused on a step
    /// error (see [`Overview::failed_pauses_last_hour`]).
    #[must_use]
    pub const fn failures_last_hour(&self) -> i64 {
        self.cancelled_last_hour + self.failed_pauses_last_hour
    }
}

/// One workflow's runs not ended, now (see [`Overview`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WorkflowNow {
    /// The workflow's name.
    pub workflow: String,
    /// Runs `ready` (due, waiting for a signal, a batch or a timed wait).
    pub ready: i64,
    /// Runs `performing` (a step in flight).
    pub performing: i64,
    /// Runs `paused`.
    pub paused: i64,
}

/// One queue now (see [`Overview`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct QueueNow {
    /// The queue's name.
    pub queue: String,
    /// Steps due now, not held back by a limit, of `ready` runs: what the
    /// claim takes next.
    pub due: i64,
    /// The earliest due time among the due steps read (all of them, below
    /// the cap).
    pub oldest_due: Option<DateTime<Utc>>,
    /// Steps held back by a concurrency limit.
    pub held: i64,
    /// Attempts in flight.
    pub in_flight: i64,
}

impl QueueNow {
    /// How long the oldest due step has been due at `now`, in whole
    /// milliseconds (0 for a step due at `now`); `None` without due steps.
    #[must_use]
    pub fn oldest_due_ms(&self, now: DateTime<Utc>) -> Option<i64> {
        self.oldest_due
            .map(|due| (now - due).num_milliseconds().max(0))
    }
}

/// One minute of the last hour (see [`Overview::minutes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MinuteCounts {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    /// Runs that finished in it.
    pub finished: i64,
    /// Runs cancelled in it.
    pub cancelled: i64,
    /// Times a run paused in it.
    pub paused: i64,
}

impl MinuteCounts {
    /// A minute's counts (for a store outside this crate).
    #[must_use]
    pub const fn new(minute: DateTime<Utc>, finished: i64, cancelled: i64, paused: i64) -> Self {
        Self {
            minute,
            finished,
            cancelled,
            paused,
        }
    }
}

impl WorkflowNow {
    /// A workflow's counts (for a store outside this crate).
    #[must_use]
    pub const fn new(workflow: String, ready: i64, performing: i64, paused: i64) -> Self {
        Self {
            workflow,
            ready,
            performing,
            paused,
        }
    }
}

impl QueueNow {
    /// A queue's counts (for a store outside this crate).
    #[must_use]
    pub const fn new(
        queue: String,
        due: i64,
        oldest_due: Option<DateTime<Utc>>,
        held: i64,
        in_flight: i64,
    ) -> Self {
        Self {
            queue,
            due,
            oldest_due,
            held,
            in_flight,
        }
    }
}

impl Overview {
    /// An overview (for a store outside this crate).
    #[must_use]
    pub const fn new(
        at: DateTime<Utc>,
        workflows: Vec<WorkflowNow>,
        queues: Vec<QueueNow>,
        (cancelled_last_hour, failed_pauses_last_hour, pauses_last_hour): (i64, i64, i64),
        minutes: Vec<MinuteCounts>,
    ) -> Self {
        Self {
            at,
            workflows,
            queues,
            cancelled_last_hour,
            failed_pauses_last_hour,
            pauses_last_hour,
            minutes,
            workflows_cut: false,
        }
    }

    /// This overview, saying whether its workflows were cut (see
    /// [`Overview::workflows_cut`]).
    #[must_use]
    pub const fn with_workflows_cut(mut self, cut: bool) -> Self {
        self.workflows_cut = cut;
        self
    }
}

/// How far behind the primary the database a client reads from is (see
/// [`Client::replica_lag`](crate::Client::replica_lag)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum ReplicaLag {
    /// The server is not in recovery: it is a primary, nothing lags.
    NotAReplica,
    /// A replica that has replayed no transaction yet.
    NothingReplayed,
    /// A replica whose last replayed transaction committed this long ago,
    /// in milliseconds (an idle primary makes this grow though nothing is
    /// missing).
    Behind {
        /// `now() - pg_last_xact_replay_timestamp()`, ms.
        ms: i64,
    },
}

impl std::fmt::Display for ReplicaLag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAReplica => f.write_str("not a replica"),
            Self::NothingReplayed => f.write_str("a replica that has replayed nothing yet"),
            Self::Behind { ms } => write!(f, "{:.1}s behind the primary", *ms as f64 / 1000.0),
        }
    }
}
