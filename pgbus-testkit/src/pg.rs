//! A fresh, migrated Postgres schema per test, dropped afterwards: for integration
//! tests of your own code against the real server.

use pgbus_runtime::{Clock, Database, Error, Schema};

/// The URL tests connect to: `PGBUS_TEST_DATABASE_URL`, else the local `test`
/// database.
#[must_use]
pub fn test_database_url() -> String {
    std::env::var("PGBUS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned())
}

/// A migrated schema of its own, `t_<random>`, dropped (with everything in it)
/// when the value is dropped, also when the test panics. Safe in parallel: each
/// test has its own schema.
///
/// ```no_run
/// # async fn demo() -> Result<(), pgbus_runtime::Error> {
/// let test_db = pgbus_testkit::TestDatabase::new().await?;
/// let client = test_db.db().client();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestDatabase {
    db: Database,
    url: String,
}

impl TestDatabase {
    /// A fresh schema on [`test_database_url`], on the database clock.
    ///
    /// # Errors
    /// Database errors (no server, no `test` database).
    pub async fn new() -> Result<Self, Error> {
        Self::with_clock(Clock::Database).await
    }

    /// A fresh schema with a clock of your choice (a `ManualClock` to pin time).
    ///
    /// # Errors
    /// Database errors.
    pub async fn with_clock(clock: Clock) -> Result<Self, Error> {
        let url = test_database_url();
        let schema = Schema::new(&format!("t_{}", uuid::Uuid::new_v4().simple()))?;
        let db = Database::connect_with(&url, schema, clock).await?;
        db.migrate().await?;
        Ok(Self { db, url })
    }

    /// The database handle: clients and workers come from it.
    #[must_use]
    pub const fn db(&self) -> &Database {
        &self.db
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.db.schema().as_str().to_owned();
        // Drop may run inside a runtime (or while unwinding): use a thread of our
        // own with its own connection.
        let dropped = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(mut config) = url.parse::<tokio_postgres::Config>() else {
                    return;
                };
                if config.get_user().is_none() {
                    // The same user `Database::connect` picks.
                    let user = std::env::var("PGUSER")
                        .or_else(|_| std::env::var("USER"))
                        .or_else(|_| std::env::var("LOGNAME"))
                        .unwrap_or_else(|_| "postgres".to_owned());
                    config.user(user);
                }
                if let Ok((client, connection)) = config.connect(tokio_postgres::NoTls).await {
                    let driver = tokio::spawn(connection);
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                        .await;
                    drop(client);
                    let _ = driver.await;
                }
            });
        });
        let _ = dropped.join();
    }
}
