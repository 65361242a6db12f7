//! Throwaway schemas: each measurement gets a migrated `bench_<uuid>` schema
//! of its own, dropped with everything in it when it is dropped, also when the
//! measurement fails, panics or is interrupted: the testkit's `TestDatabase`
//! (a copy of a template schema, `pgbus_tmpl_<digest>`, which it migrates once
//! and leaves in the database for the next run).

use pgbus_runtime::Database;
use pgbus_testkit::TestDatabase;

use crate::BoxError;

/// Whether the engine's databases run with group commit (off with
/// `--no-group-commit`).
pub(crate) static GROUP_COMMIT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

fn group_commit() -> bool {
    GROUP_COMMIT.load(std::sync::atomic::Ordering::Relaxed)
}

/// A migrated schema of its own, dropped when this value is dropped.
pub(crate) struct BenchSchema(TestDatabase);

impl BenchSchema {
    /// Makes a fresh, migrated schema on `url`, on the database clock (so
    /// every timestamp compared below comes from one clock).
    pub(crate) async fn create(url: &str) -> Result<Self, BoxError> {
        let schema = TestDatabase::builder()
            .url(url)
            .prefix("bench")
            .durable_commits()
            .build();
        Ok(Self(schema.await?))
    }

    /// The pgbus database on this schema: clients and workers come from it.
    pub(crate) const fn db(&self) -> &Database {
        self.0.db()
    }

    /// Another pgbus database on this schema, on a pool of its own: fresh
    /// connections, whose prepared statements have no plans cached yet.
    pub(crate) async fn connect_again(&self) -> Result<Database, BoxError> {
        Ok(Database::builder(self.0.url())
            .schema(self.0.schema().clone())
            .clock(self.db().clock().clone())
            .group_commit(group_commit())
            .connect()
            .await?)
    }

    /// Another pgbus database on this schema whose connections go to
    /// 127.0.0.1:`port` (a [`crate::wire::WireProxy`] in front of the
    /// server) without TLS, as the same user, to the same database.
    pub(crate) async fn connect_via(&self, port: u16) -> Result<Database, BoxError> {
        let config = pgbus_testkit::raw_config(self.0.url())?;
        let user = config.get_user().unwrap_or("postgres");
        let dbname = config.get_dbname().unwrap_or(user);
        let url = format!("postgres://{user}@127.0.0.1:{port}/{dbname}?sslmode=disable");
        Ok(Database::builder(&url)
            .schema(self.0.schema().clone())
            .clock(self.db().clock().clone())
            .group_commit(group_commit())
            .connect()
            .await?)
    }

    /// Where the server is, when the URL names it over TCP: the first host
    /// and port.
    pub(crate) fn tcp_server(&self) -> Option<std::net::SocketAddr> {
        use std::net::ToSocketAddrs;
        let config = pgbus_testkit::raw_config(self.0.url()).ok()?;
        let tokio_postgres::config::Host::Tcp(host) = config.get_hosts().first()? else {
            return None;
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        (host.as_str(), port).to_socket_addrs().ok()?.next()
    }

    /// The URL the schema's database was reached at.
    pub(crate) fn url(&self) -> &str {
        self.0.url()
    }

    /// The schema's name, unquoted (`bench_<hex>`).
    pub(crate) fn name(&self) -> &str {
        self.0.schema().as_str()
    }

    /// `sql` with `{schema}` replaced by the quoted schema name (a validated
    /// `bench_<hex>` identifier, safe to splice).
    pub(crate) fn sql(&self, sql: &str) -> String {
        self.0.sql(sql)
    }

    /// A connection of its own, outside the engine's pool: for bulk loads and
    /// maintenance whose session settings must not leak into the pool.
    pub(crate) async fn admin(&self) -> Result<tokio_postgres::Client, BoxError> {
        connect(self.0.url()).await
    }
}

/// A plain connection to `url`, as the same user `Database::connect` picks
/// when the URL names none (the testkit's one rule for it).
pub(crate) async fn connect(url: &str) -> Result<tokio_postgres::Client, BoxError> {
    let mut config = pgbus_testkit::raw_config(url)?;
    config.application_name("pgbus-bench");
    Ok(pgbus_testkit::connect_raw(&config).await?)
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
