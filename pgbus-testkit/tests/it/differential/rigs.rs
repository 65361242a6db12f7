//! The two stores a scenario runs on, and the little each must do for a test
//! that the store contract has no verb for.

use std::time::Duration;

use pgbus_runtime::store::{PgStore, Store};
use pgbus_runtime::{Clock, ManualClock, RunId};
use pgbus_testkit::{MemoryStore, TestDatabase, TestEnv, default_start};

use super::harness::WORKER;

/// A store under test, and what a scenario needs of it beyond the store
/// contract. Everything else a scenario does goes through [`Store`]'s verbs,
/// the runtime's `Runner` and `store::sweep` (see `Harness`); each method
/// here says why it cannot.
pub(super) trait Rig {
    /// The store.
    type S: Store + Clone;

    /// The store itself.
    fn store(&self) -> &Self::S;

    /// Moves the store's clock forward. The contract reads the store's time
    /// and never sets it: the memory store's is virtual, the Postgres
    /// store's a `ManualClock` bound into its statements.
    fn advance(&self, by: Duration);

    /// Declares `worker` dead now: its heartbeat stopped at the current time,
    /// so the sweep takes its attempts for lost once the lost-worker threshold
    /// passes. The contract knows no workers: Postgres keeps their heartbeats
    /// in the `workers` table (and takes a claim by a worker with no row for
    /// lost at once), while the memory store knows only the workers it was
    /// told died.
    async fn worker_died(&self, worker: &str);

    /// Moves the in-progress claim of `run` to another worker while its body
    /// runs, as a second worker's claim would; whether a step of the run was
    /// in progress. No verb re-points a claim: the one that takes a claim
    /// away, the sweep, also ends the attempt.
    async fn lose_claim(&self, run: RunId) -> bool;
}

/// The memory store, with the environment it belongs to.
pub(super) struct Memory {
    /// Held for its test hooks on its store (the virtual clock, a lost
    /// claim); its own runner has nothing registered and runs nothing.
    env: TestEnv,
}

impl Memory {
    pub(super) fn new() -> Self {
        Self {
            env: TestEnv::new(),
        }
    }
}

impl Rig for Memory {
    type S = MemoryStore;

    fn store(&self) -> &MemoryStore {
        self.env.store()
    }

    fn advance(&self, by: Duration) {
        self.env.advance(by);
    }

    async fn worker_died(&self, worker: &str) {
        self.env.store().worker_died(worker);
    }

    async fn lose_claim(&self, run: RunId) -> bool {
        self.env.lose_claim(run)
    }
}

/// The Postgres store in a schema of its own, on a pinned clock.
pub(super) struct Pinned {
    store: PgStore,
    clock: ManualClock,
    db: TestDatabase,
}

impl Pinned {
    /// A fresh schema, its clock at [`default_start`], and a row for the
    /// harness's own worker, as a worker writes its row before its first
    /// claim (and never heartbeats after: neither did a worker driven by
    /// `run_until_idle`).
    pub(super) async fn new() -> Self {
        let clock = ManualClock::new(default_start());
        let db = TestDatabase::with_clock(Clock::Manual(clock.clone()))
            .await
            .expect("a test schema");
        let pinned = Self {
            store: db.db().store(),
            clock,
            db,
        };
        pinned.worker_row(WORKER).await;
        pinned
    }

    /// Writes `worker`'s row with its heartbeat now.
    async fn worker_row(&self, worker: &str) {
        let sql = format!(
            "INSERT INTO \"{}\".workers (id, host, pid, queues, started_at, heartbeat_at) \
             VALUES ($1, 'test', 0, ARRAY[]::text[], $2, $2)",
            self.db.db().schema()
        );
        let client = self.db.db().pool().get().await.expect("a connection");
        client
            .execute(&sql, &[&worker, &self.clock.now()])
            .await
            .expect("a worker row");
    }
}

impl Rig for Pinned {
    type S = PgStore;

    fn store(&self) -> &PgStore {
        &self.store
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// A row whose heartbeat is now and never moves again.
    async fn worker_died(&self, worker: &str) {
        self.worker_row(worker).await;
    }

    /// The row re-pointed in SQL.
    async fn lose_claim(&self, run: RunId) -> bool {
        let sql = format!(
            "UPDATE \"{}\".steps SET worker_id = 'elsewhere' \
             WHERE run_id = $1 AND status = 'in_progress'",
            self.db.db().schema()
        );
        let client = self.db.db().pool().get().await.expect("a connection");
        let moved = client
            .execute(&sql, &[&run.0])
            .await
            .expect("re-point the claim");
        moved == 1
    }
}
