//! The client: start runs, read them back, list them.

use std::sync::Arc;

use crate::connection::Connector;
use crate::context::RunId;
use crate::pg::store::PgStore;

mod actions;
mod checks;
mod deploy;
mod insights;
mod listen;
mod operator;
mod reads;
mod result;
mod schedules;
mod start;
mod start_many;
mod workers;

pub(crate) use listen::ResultListener;
pub use result::{RESULT_POLL_INTERVAL, RESULT_POLL_INTERVAL_LISTENING, ResultWait};

pub use checks::{check_actor, check_key, check_reason, checked_reason};
pub use insights::{
    BucketCounts, Coverage, InsightsFilter, OutcomeCount, RunActivity, SlowestSteps, StepOutcomes,
    StepTimings, Tally,
};
pub use workers::{RegisteredWorkflow, WorkerView};

/// Starts and reads runs. Cheap to clone; all clones, and every client of
/// the same [`Database`](crate::Database), share one pool and one `LISTEN`
/// connection for their waits on results ([`Client::result`]).
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) store: PgStore,
    /// The waits on results, and the session that wakes them.
    pub(crate) results: Arc<listen::ResultListener>,
    /// The per-deployment overrides its starts apply (its database's).
    pub(crate) overrides: Arc<crate::overrides::Overrides>,
}

impl Client {
    /// A client on `store`, whose waits on results listen through `listen`
    /// (`None`: they poll).
    pub(crate) fn new(store: PgStore, listen: Option<Arc<Connector>>) -> Self {
        let results = Arc::new(ResultListener::new(listen, store.schema.result_channel()));
        Self::sharing(store, results)
    }

    /// A client on `store` whose waits on results share `results` (its
    /// database's, so that every client of one database holds one `LISTEN`
    /// connection at most, however many are made).
    pub(crate) fn sharing(store: PgStore, results: Arc<ResultListener>) -> Self {
        Self {
            store,
            results,
            overrides: Arc::default(),
        }
    }
}

impl Client {
    /// The definition of `W` this client starts runs with: `W`'s own, or the
    /// one its database's overrides derive from it.
    ///
    /// # Errors
    /// [`Error::InvalidOverride`](crate::Error::InvalidOverride) when the
    /// overrides do not fit `W` (a step it lacks, a `wait_timeout` on a step
    /// without `wait_for`): nothing is started.
    pub(crate) fn definition<W: crate::Workflow>(
        &self,
    ) -> Result<&'static crate::WorkflowDefinition, crate::Error> {
        self.overrides.apply(W::DEFINITION)
    }
}

/// What a start did: the run, and whether this call created it. Every start
/// returns one ([`Client::start`], [`Client::start_idempotent`],
/// [`Client::start_with`], their `_in` and `_in_sqlx` forms, each item of
/// [`Client::start_many`], and the testkit's `TestEnv::start`), so code that
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
    /// What a start did: created `run_id` (`created`), or found it. For a
    /// store outside this crate (the testkit's memory store) answering a
    /// start as [`Client::start`] does.
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
