//! The two drivers: one script through the memory store or a real Postgres worker.

use super::*;

/// What a store must let a scenario do.
#[allow(clippy::large_enum_variant)] // two values per test; size does not matter
pub(super) enum Driver {
    Memory(Arc<TestEnv>),
    Postgres {
        db: TestDatabase,
        clock: ManualClock,
        client: Client,
        worker: Worker,
    },
}

impl Driver {
    pub(super) async fn postgres(
        register: impl FnOnce(pgbus_runtime::WorkerBuilder) -> pgbus_runtime::WorkerBuilder,
    ) -> Self {
        let clock = ManualClock::new(default_start());
        let db = TestDatabase::with_clock(Clock::Manual(clock.clone()))
            .await
            .expect("a test schema");
        let client = db.db().client();
        let worker = register(db.db().worker().notifications(false))
            .build()
            .expect("a worker");
        Self::Postgres {
            db,
            clock,
            client,
            worker,
        }
    }

    pub(super) async fn start<W: Workflow>(&self, input: &W::Input) -> RunId {
        match self {
            Self::Memory(env) => env.start::<W>(input).expect("start").run_id,
            Self::Postgres { client, .. } => client.start::<W>(input).await.expect("start").run_id,
        }
    }

    pub(super) async fn start_keyed<W: Workflow>(&self, input: &W::Input, key: &str) -> RunId {
        match self {
            Self::Memory(env) => env.start_idempotent::<W>(input, key).expect("start").run_id,
            Self::Postgres { client, .. } => {
                client
                    .start_idempotent::<W>(input, key)
                    .await
                    .expect("start")
                    .run_id
            }
        }
    }

    pub(super) async fn run_until_idle(&self) {
        match self {
            Self::Memory(env) => {
                env.run_until_idle().await;
            }
            Self::Postgres { worker, .. } => {
                worker.run_until_idle().await.expect("run");
            }
        }
    }

    pub(super) fn advance(&self, by: Duration) {
        match self {
            Self::Memory(env) => env.advance(by),
            Self::Postgres { clock, .. } => clock.advance(by),
        }
    }

    pub(super) async fn view(&self, run: RunId) -> RunView {
        match self {
            Self::Memory(env) => env.run(run).expect("run"),
            Self::Postgres { client, .. } => client.run(run).await.expect("run"),
        }
    }

    pub(super) async fn view_with(&self, run: RunId, read: pgbus_runtime::RunRead) -> RunView {
        match self {
            Self::Memory(env) => env.run_with(run, read).expect("run"),
            Self::Postgres { client, .. } => client.run_with(run, read).await.expect("run"),
        }
    }

    /// Whether the run still exists.
    pub(super) async fn exists(&self, run: RunId) -> bool {
        let found = match self {
            Self::Memory(env) => env.run(run).map(drop),
            Self::Postgres { client, .. } => client.run(run).await.map(drop),
        };
        match found {
            Ok(()) => true,
            Err(Error::RunNotFound { .. }) => false,
            Err(other) => panic!("reading run {run}: {other}"),
        }
    }

    /// An operator action; the error, if refused, as text both stores must share.
    pub(super) async fn act(
        &self,
        run: RunId,
        action: Action,
        reason: &str,
    ) -> Result<RunStatus, String> {
        let result = match (self, action) {
            (Self::Memory(env), Action::Pause) => env.pause(run, "ops", reason),
            (Self::Memory(env), Action::Resume) => env.resume(run, "ops", reason),
            (Self::Memory(env), Action::Cancel) => env.cancel(run, "ops", reason),
            (Self::Memory(env), Action::Skip) => env.skip(run, "ops", reason),
            (Self::Postgres { client, .. }, Action::Pause) => {
                client.pause(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Resume) => {
                client.resume(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Cancel) => {
                client.cancel(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Skip) => client.skip(run, "ops", reason).await,
        };
        result.map_err(|e| e.to_string())
    }

    /// Sends a signal; the error as text.
    pub(super) async fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run: RunId,
        name: &str,
        payload: &T,
    ) -> Result<pgbus_runtime::SignalId, String> {
        let result = match self {
            Self::Memory(env) => env.signal(run, name, payload),
            Self::Postgres { client, .. } => client.signal(run, name, payload).await,
        };
        result.map_err(|e| e.to_string())
    }

    /// Sweeps once: (repaired, runs deleted).
    pub(super) async fn sweep(&self) -> (usize, u64) {
        let report = match self {
            Self::Memory(env) => env.sweep(),
            Self::Postgres { worker, .. } => worker.sweep().await.expect("sweep"),
        };
        (report.repaired, report.runs_deleted)
    }

    /// Every run the store holds, by id.
    pub(super) async fn all_views(&self) -> std::collections::BTreeMap<i64, RunView> {
        let filter = RunFilter::new().limit(1_000);
        let summaries = match self {
            Self::Memory(env) => env.list_runs(&filter).expect("list"),
            Self::Postgres { client, .. } => client.list_runs(&filter).await.expect("list"),
        };
        assert!(
            summaries.len() < 1_000,
            "a scenario keeps to a page of runs"
        );
        let mut views = std::collections::BTreeMap::new();
        for summary in summaries {
            views.insert(summary.id.0, self.view(summary.id).await);
        }
        views
    }

    /// The fan_out children of `run`: its batches in order, each batch's runs
    /// oldest first.
    pub(super) async fn children(&self, run: RunId) -> Vec<RunId> {
        let views = self.all_views().await;
        let batches = &views.get(&run.0).expect("the parent exists").batches;
        batches
            .iter()
            .flat_map(|batch| {
                views
                    .values()
                    .filter(move |view| view.parent_batch_id == Some(batch.id))
                    .map(|view| view.run.id)
            })
            .collect()
    }

    /// Sweeps once: the whole report.
    pub(super) async fn sweep_report(&self) -> SweepReport {
        match self {
            Self::Memory(env) => env.sweep(),
            Self::Postgres { worker, .. } => worker.sweep().await.expect("sweep"),
        }
    }

    /// Runs what is due now, one attempt: call it with a single row due, so
    /// that the worker's claim (up to its concurrency) and the environment's
    /// (the first due row) take the same one.
    pub(super) async fn run_one(&self) {
        match self {
            Self::Memory(env) => {
                env.run_next().await.expect("a step was due");
            }
            Self::Postgres { worker, .. } => {
                assert_eq!(worker.run_once().await.expect("run"), 1, "one step due");
            }
        }
    }

    /// Claims the next due step for a worker that dies at once, before any
    /// body runs (as a claim the batch or the gate decides would). Memory:
    /// `TestEnv::crash_next`; Postgres: what claim.sql writes, under a worker
    /// that never registered and so never heartbeats. Returns the run.
    pub(super) async fn claim_and_die(&self) -> RunId {
        match self {
            Self::Memory(env) => env.crash_next().expect("a step was due"),
            Self::Postgres { db, clock, .. } => {
                let schema = format!("\"{}\"", db.db().schema().as_str());
                let sql = CLAIM_AND_DIE.replace("{schema}", &schema);
                let client = db.db().pool().get().await.expect("a connection");
                let now = clock.now();
                let row = client
                    .query_one(&sql, &[&now])
                    .await
                    .expect("a step was due");
                assert_eq!(
                    (row.get::<_, i64>(1), row.get::<_, i64>(2)),
                    (1, 1),
                    "the run moved, the event written"
                );
                RunId(row.get(0))
            }
        }
    }

    /// Runs the next due attempt in the background.
    pub(super) fn spawn_next(&self) -> tokio::task::JoinHandle<()> {
        match self {
            Self::Memory(env) => {
                let env = Arc::clone(env);
                tokio::spawn(async move {
                    env.run_next().await;
                })
            }
            Self::Postgres { worker, .. } => {
                let worker = worker.clone();
                tokio::spawn(async move {
                    worker.run_once().await.expect("run");
                })
            }
        }
    }

    /// Claims the next due step for a worker that dies at once. Postgres: the
    /// worker claims and its body (which signals `entered` and then hangs on a
    /// first attempt) is dropped mid-flight, as a SIGKILL would; the worker never
    /// heartbeats after its claim, like a dead one.
    pub(super) async fn crash_next(&self, entered: &tokio::sync::Notify) {
        match self {
            Self::Memory(env) => {
                env.crash_next().expect("a step was due");
            }
            Self::Postgres { .. } => {
                let running = self.spawn_next();
                entered.notified().await;
                running.abort();
                assert!(running.await.is_err_and(|e| e.is_cancelled()));
            }
        }
    }
}

/// claim.sql for a worker named `crashed` that dies right after its claim: the
/// first due row of a ready run (by priority, due time, id) in progress, its
/// run performing, a `step_started` event. $1 now.
pub(super) const CLAIM_AND_DIE: &str = "
WITH due AS (
    SELECT s.id
    FROM {schema}.steps s
    JOIN {schema}.runs r ON r.id = s.run_id
    WHERE s.status IN ('scheduled', 'waiting') AND s.scheduled_at <= $1
      AND r.status = 'ready'
    ORDER BY s.priority, s.scheduled_at, s.id
    LIMIT 1
), claimed AS (
    UPDATE {schema}.steps s
    SET status = 'in_progress', started_at = $1, worker_id = 'crashed',
        stall_at = $1 + coalesce(s.timeout_ms, 300000) * interval '1 millisecond'
    FROM due
    WHERE s.id = due.id
    RETURNING s.id, s.run_id, s.step_name, s.attempt
), moved AS (
    UPDATE {schema}.runs r SET status = 'performing', updated_at = $1
    FROM claimed c
    WHERE r.id = c.run_id
    RETURNING r.id
), started AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
    SELECT run_id, id, step_name, attempt, 'step_started', 'crashed', $1 FROM claimed
    RETURNING id
)
SELECT c.run_id, (SELECT count(*) FROM moved), (SELECT count(*) FROM started)
FROM claimed c";
