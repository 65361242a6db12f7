//! The Postgres harness: every test gets a schema of its own, `t_<uuid>`, in the
//! database `PGBUS_TEST_DATABASE_URL` names (default the local `test`), dropped
//! afterwards even when the test panics: the testkit's `TestDatabase`, a copy of
//! a template migrated once. Time is pinned with a [`ManualClock`] unless a test
//! asks for the database clock.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use pgbus_runtime::{Client, Clock, Database, ManualClock, RunId, RunView};
use pgbus_testkit::TestDatabase;
use tokio_postgres::types::ToSql;

/// Where the tests connect.
pub(crate) fn database_url() -> String {
    pgbus_testkit::test_database_url()
}

/// The time every pinned clock starts at.
pub(crate) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2031, 3, 1, 12, 0, 0)
        .single()
        .expect("a valid time")
}

/// `t0()` plus `ms` milliseconds.
pub(crate) fn at_ms(ms: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::milliseconds(ms)
}

/// A schema of one test, on a pinned clock (or the database clock).
pub(crate) struct TestDb {
    /// The database handle, on this test's schema and clock.
    pub(crate) db: Database,
    /// The pinned clock (unused by tests on the database clock).
    pub(crate) clock: ManualClock,
    // Declared last: dropped after `db`; it drops the schema.
    database: TestDatabase,
}

impl TestDb {
    /// A migrated schema on a clock pinned at [`t0`].
    pub(crate) async fn new() -> Self {
        Self::with(TestDatabase::builder(), None).await
    }

    /// A migrated schema on the database clock.
    pub(crate) async fn on_database_clock() -> Self {
        Self::with(TestDatabase::builder(), Some(Clock::Database)).await
    }

    /// A schema name and a connection, nothing created yet.
    pub(crate) async fn unmigrated() -> Self {
        Self::with(TestDatabase::builder().unmigrated(), None).await
    }

    /// A migrated schema named `t_<uuid>` padded with `x` to `len` bytes, on
    /// a pinned clock.
    pub(crate) async fn with_name_of_len(len: usize) -> Self {
        Self::with(TestDatabase::builder().name_len(len), None).await
    }

    async fn with(builder: pgbus_testkit::TestDatabaseBuilder, clock: Option<Clock>) -> Self {
        let manual = ManualClock::new(t0());
        let clock = clock.unwrap_or_else(|| Clock::Manual(manual.clone()));
        let database = builder
            .clock(clock)
            .build()
            .await
            .expect("a schema on the test database");
        Self {
            db: database.db().clone(),
            clock: manual,
            database,
        }
    }

    /// Another connection (its own pool) to the same schema and clock: what a
    /// second process would have.
    pub(crate) async fn second_connection(&self) -> Database {
        self.database
            .connect_again()
            .await
            .expect("connect to the test database")
    }

    /// The schema's name.
    pub(crate) fn schema(&self) -> &str {
        self.database.schema().as_str()
    }

    /// A client.
    pub(crate) fn client(&self) -> Client {
        self.db.client()
    }

    /// `sql` with `{schema}` replaced by the quoted schema name.
    pub(crate) fn sql(&self, sql: &str) -> String {
        self.database.sql(sql)
    }

    /// Runs a statement on this schema; returns the rows it changed.
    pub(crate) async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> u64 {
        let client = self.db.pool().get().await.expect("a connection");
        client
            .execute(&self.sql(sql), params)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    }

    /// Runs a query on this schema.
    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        let client = self.db.pool().get().await.expect("a connection");
        client
            .query(&self.sql(sql), params)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    }

    /// A query's single `bigint` (e.g. a `count(*)`).
    pub(crate) async fn count(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> i64 {
        self.query(sql, params).await[0].get(0)
    }

    /// Whether a worker of this schema holds its `LISTEN` session within 5 s
    /// (only pgbus's own connections count, not a test's listener).
    pub(crate) async fn worker_listens(&self) -> bool {
        let listen = format!("LISTEN \"pgbus_{}\"", self.schema());
        eventually(Duration::from_secs(5), || async {
            self.count(
                "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND application_name = 'pgbus'",
                &[&listen],
            )
            .await
                > 0
        })
        .await
    }

    /// A run, read back through the client.
    pub(crate) async fn run(&self, run_id: RunId) -> RunView {
        self.client().run(run_id).await.expect("the run exists")
    }
}

/// Waits until `check` holds, checking every 10 ms, for at most `bound`. Returns
/// whether it held. For effects of a worker running on its own; tests that can
/// drive a worker step by step do that instead.
pub(crate) async fn eventually<F, Fut>(bound: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A run's events, as `event` or `event:step#attempt`, in order.
pub(crate) fn events(view: &RunView) -> Vec<String> {
    view.events
        .iter()
        .map(|e| match (&e.step_name, e.attempt) {
            (Some(step), Some(attempt)) => format!("{}:{step}#{attempt}", e.event),
            _ => e.event.clone(),
        })
        .collect()
}

/// A run's step rows, as `step#attempt status/outcome`, in order.
pub(crate) fn steps(view: &RunView) -> Vec<String> {
    view.steps
        .iter()
        .map(|s| {
            format!(
                "{}#{} {}/{}",
                s.step_name,
                s.attempt,
                s.status,
                s.outcome.map_or("-", |o| o.as_str())
            )
        })
        .collect()
}

/// The one step row of `step`, attempt `attempt`.
pub(crate) fn step<'a>(view: &'a RunView, step: &str, attempt: i32) -> &'a pgbus_runtime::StepView {
    view.steps
        .iter()
        .find(|s| s.step_name == step && s.attempt == attempt)
        .unwrap_or_else(|| panic!("no row {step}#{attempt} in {:?}", steps(view)))
}

/// Taken by the tests that run several busy workers (about forty connections
/// at their peak), so two of them never run at once and exhaust the server's
/// `max_connections` together.
pub(crate) static MANY_CONNECTIONS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The database's deadlock count, from a connection of its own: the backends
/// of a dropped pool report theirs as they exit, so call it once the pools of
/// interest are gone. Database-wide, so it counts other tests' deadlocks too.
pub(crate) async fn deadlocks(t: &TestDb) -> i64 {
    // Give exiting backends a moment to flush their statistics.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let db = t.second_connection().await;
    let client = db.pool().get().await.expect("a connection");
    client
        .query_one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .expect("read pg_stat_database")
        .get(0)
}
