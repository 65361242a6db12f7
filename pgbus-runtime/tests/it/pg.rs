//! The Postgres harness: every test gets a schema of its own, `t_<uuid>`, in the
//! database `PGBUS_TEST_DATABASE_URL` names (default the local `test`), dropped
//! afterwards even when the test panics. Time is pinned with a [`ManualClock`]
//! unless a test asks for the database clock.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use pgbus_runtime::{Client, Clock, Database, ManualClock, RunId, RunView, Schema};
use tokio_postgres::types::ToSql;

/// Where the tests connect.
pub(crate) fn database_url() -> String {
    std::env::var("PGBUS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned())
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
    // Declared last: dropped after `db`, so the pool is gone before the schema.
    guard: SchemaGuard,
}

impl TestDb {
    /// A migrated schema on a clock pinned at [`t0`].
    pub(crate) async fn new() -> Self {
        let test = Self::unmigrated_with(None).await;
        test.db.migrate().await.expect("migrate a fresh schema");
        test
    }

    /// A migrated schema on the database clock.
    pub(crate) async fn on_database_clock() -> Self {
        let test = Self::unmigrated_with(Some(Clock::Database)).await;
        test.db.migrate().await.expect("migrate a fresh schema");
        test
    }

    /// A schema name and a connection, nothing created yet.
    pub(crate) async fn unmigrated() -> Self {
        Self::unmigrated_with(None).await
    }

    /// A migrated schema named `t_<uuid>` padded with `x` to `len` bytes, on
    /// a pinned clock.
    pub(crate) async fn with_name_of_len(len: usize) -> Self {
        let mut name = format!("t_{}", uuid::Uuid::new_v4().simple());
        while name.len() < len {
            name.push('x');
        }
        let test = Self::named(name, None).await;
        test.db.migrate().await.expect("migrate a fresh schema");
        test
    }

    async fn unmigrated_with(clock: Option<Clock>) -> Self {
        Self::named(format!("t_{}", uuid::Uuid::new_v4().simple()), clock).await
    }

    async fn named(name: String, clock: Option<Clock>) -> Self {
        // The guard exists before anything can fail, so nothing is left behind.
        let guard = SchemaGuard(name.clone());
        let manual = ManualClock::new(t0());
        let clock = clock.unwrap_or_else(|| Clock::Manual(manual.clone()));
        let schema = Schema::new(&name).expect("a valid schema name");
        let db = Database::connect_with(&database_url(), schema, clock)
            .await
            .expect("connect to the test database");
        Self {
            db,
            clock: manual,
            guard,
        }
    }

    /// Another connection (its own pool) to the same schema and clock: what a
    /// second process would have.
    pub(crate) async fn second_connection(&self) -> Database {
        Database::connect_with(
            &database_url(),
            self.db.schema().clone(),
            self.db.clock().clone(),
        )
        .await
        .expect("connect to the test database")
    }

    /// The schema's name.
    pub(crate) fn schema(&self) -> &str {
        &self.guard.0
    }

    /// A client.
    pub(crate) fn client(&self) -> Client {
        self.db.client()
    }

    /// `sql` with `{schema}` replaced by the quoted schema name.
    pub(crate) fn sql(&self, sql: &str) -> String {
        sql.replace("{schema}", &format!("\"{}\"", self.schema()))
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

/// Drops its schema, with everything in it, when dropped.
struct SchemaGuard(String);

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let schema = self.0.clone();
        // Drop may run inside a runtime, or while a panic unwinds: use a thread
        // with a runtime and a connection of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let mut config: tokio_postgres::Config =
                    database_url().parse().map_err(|e| format!("{e}"))?;
                if config.get_user().is_none() {
                    let user = std::env::var("PGUSER")
                        .or_else(|_| std::env::var("USER"))
                        .unwrap_or_else(|_| "postgres".to_owned());
                    config.user(user);
                }
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("{e}"))?;
                let driver = tokio::spawn(connection);
                // A body still holding a lock must not hang the test run.
                let result = client
                    .batch_execute(&format!(
                        "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                    ))
                    .await
                    .map_err(|e| format!("{e:?}"));
                drop(client);
                let _ = driver.await;
                result
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("could not drop schema {}: {error}", self.0),
            Err(_) => eprintln!("could not drop schema {}: the thread panicked", self.0),
        }
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
