//! Throwaway schemas: each measurement gets a fresh, migrated `bench_<uuid>`
//! schema, dropped with everything in it when its guard is dropped, also when
//! the measurement fails, panics or is interrupted.

use pgbus_runtime::{Clock, Database, Schema};

use crate::BoxError;

/// A migrated schema of its own, dropped when this value is dropped.
pub(crate) struct BenchSchema {
    db: Database,
    url: String,
}

impl BenchSchema {
    /// Makes and migrates a fresh schema on `url`, on the database clock (so
    /// every timestamp compared below comes from one clock).
    pub(crate) async fn create(url: &str) -> Result<Self, BoxError> {
        let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
        let db = Database::connect_with(url, Schema::new(&name)?, Clock::Database).await?;
        // The guard exists before the migration creates the schema, so a
        // migration that fails half way is dropped too.
        let bench = Self {
            db,
            url: url.to_owned(),
        };
        bench.db.migrate().await?;
        Ok(bench)
    }

    /// The pgbus database on this schema: clients and workers come from it.
    pub(crate) const fn db(&self) -> &Database {
        &self.db
    }

    /// Another pgbus database on this schema, on a pool of its own: fresh
    /// connections, whose prepared statements have no plans cached yet.
    pub(crate) async fn connect_again(&self) -> Result<Database, BoxError> {
        let schema = self.db.schema().clone();
        Ok(Database::connect_with(&self.url, schema, Clock::Database).await?)
    }

    /// `sql` with `{schema}` replaced by the quoted schema name (a validated
    /// `bench_<hex>` identifier, safe to splice).
    pub(crate) fn sql(&self, sql: &str) -> String {
        sql.replace("{schema}", &format!("\"{}\"", self.db.schema().as_str()))
    }

    /// A connection of its own, outside the engine's pool: for bulk loads and
    /// maintenance whose session settings must not leak into the pool.
    pub(crate) async fn admin(&self) -> Result<tokio_postgres::Client, BoxError> {
        connect(&self.url).await
    }
}

impl Drop for BenchSchema {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.db.schema().as_str().to_owned();
        // Drop may run inside the runtime, or while unwinding: use a thread of
        // our own with its own runtime and connection.
        let dropped = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return Err(format!("no runtime to drop schema {schema}"));
            };
            runtime.block_on(async move {
                let client = connect(&url).await.map_err(|e| e.to_string())?;
                // A worker that was abandoned mid-transaction holds locks for a
                // moment at most; never hang the benchmark's exit on one.
                client
                    .batch_execute(&format!(
                        "SET lock_timeout = '30s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                    ))
                    .await
                    .map_err(|e| format!("could not drop schema {schema}: {e}"))
            })
        });
        match dropped.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("pgbus-bench: {error}"),
            Err(_) => eprintln!("pgbus-bench: the thread dropping a schema panicked"),
        }
    }
}

/// A plain connection to `url`, as the same user `Database::connect` picks
/// when the URL names none (libpq's rule: the operating-system user).
pub(crate) async fn connect(url: &str) -> Result<tokio_postgres::Client, BoxError> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if config.get_user().is_none() {
        let user = std::env::var("PGUSER")
            .or_else(|_| std::env::var("USER"))
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "postgres".to_owned());
        config.user(user);
    }
    config.application_name("pgbus-bench");
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("pgbus-bench: admin connection ended: {error}");
        }
    });
    Ok(client)
}

/// `CHECKPOINT`: writes every dirty buffer now, so the next measurement starts
/// where every other one does, neither paying for the last phase's writes
/// nor sped up by a checkpoint that happens not to fall in it. Needs a
/// superuser or `pg_checkpoint`; without it the measurement goes on, noted.
pub(crate) async fn checkpoint(admin: &tokio_postgres::Client) {
    if let Err(error) = admin.batch_execute("CHECKPOINT").await {
        eprintln!("pgbus-bench: CHECKPOINT refused, measuring without it: {error}");
    }
}
