//! A migrated Postgres schema per test, dropped afterwards: for integration
//! tests of your own code against the real server.
//!
//! The first [`TestDatabase`] of a migration set migrates a template schema,
//! `pgbus_tmpl_<digest>` (the digest is of [`MIGRATIONS`]' versions, names and
//! checksums), once: with pgbus's own [`Database::migrate`], whose advisory
//! lock makes test processes running side by side take turns, so the template
//! is migrated once for every process and binary. Each test then gets a copy
//! in one round trip: the migrations' SQL for its own schema in one
//! transaction, with the template's bookkeeping table and rows, so
//! [`Database::migrate`] on the copy is a no-op, as on a migrated schema. A
//! test's own migration took several round trips per migration under a lock;
//! what remains is the server creating the tables and indexes.
//!
//! Why a copy of the schema and not a database cloned from a template
//! database (`CREATE DATABASE ... TEMPLATE`): measured with `psql` on a
//! two-core machine, a clone costs more than the migrations (about 90 ms for
//! the clone, 100 ms more for the first connection to build the new
//! database's catalog caches, 40 ms to drop it, against 50 to 70 ms for the
//! migrations' SQL and 10 ms to drop a schema), and every test would need a
//! URL of its own, where a schema shares the server's test database and its
//! URL.
//!
//! The template stays in the test database for the next run (a few empty
//! tables per migration set).

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use pgbus_runtime::{Clock, Database, Error, MIGRATIONS, ManualClock, Schema};

/// The URL tests connect to: `PGBUS_TEST_DATABASE_URL`, else the local `test`
/// database.
#[must_use]
pub fn test_database_url() -> String {
    std::env::var("PGBUS_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned())
}

/// The user pgbus connects as when a URL names none, by the rule of
/// `pgbus-runtime`'s connection code (libpq's): `PGUSER` unless unset or
/// empty, else the operating system's user name. `None` when neither can be
/// read.
///
/// The one place the repository's tests and tools resolve a user, for
/// connections of their own ([`raw_config`]) and for files that must name it
/// (a `PgBouncer` user list).
#[must_use]
pub fn default_user() -> Option<String> {
    std::env::var("PGUSER")
        .ok()
        .filter(|user| !user.is_empty())
        .or_else(|| whoami::username().ok().filter(|user| !user.is_empty()))
}

/// tokio-postgres's settings for `url`, with [`default_user`] when the URL
/// names no user: for a plain connection beside pgbus's pool, as the same
/// user (see [`connect_raw`]).
///
/// # Errors
/// [`Error::Database`] when tokio-postgres cannot parse `url`.
pub fn raw_config(url: &str) -> Result<tokio_postgres::Config, Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if config.get_user().is_none()
        && let Some(user) = default_user()
    {
        config.user(user);
    }
    Ok(config)
}

/// A plain tokio-postgres connection with `config`, without TLS, its driver
/// spawned on the current Tokio runtime: for what must not go through pgbus's
/// pool (a session that holds a lock, `LISTEN`, session settings).
///
/// # Errors
/// [`Error::Database`] when the connection fails.
pub async fn connect_raw(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, Error> {
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// A migrated schema of its own, `t_<random>` (a copy of the template, see the
/// module's docs), dropped with everything in it when the value is dropped,
/// also when the test panics. Safe in parallel: each test has its own schema.
///
/// Its connections commit with `synchronous_commit = off`: a commit returns
/// before its WAL is flushed (it is flushed within a few hundred
/// milliseconds), which spares each commit a disk flush (about 3 ms on a
/// virtual disk) and changes nothing a test of the engine can see: locks,
/// visibility and ordering are the same; only a crash of the server itself
/// could lose the last commits. A benchmark or a test of what a server crash
/// keeps asks for [`TestDatabaseBuilder::durable_commits`].
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
    // Declared last: dropped after `db`, so its pool is gone before the
    // schema is.
    _guard: SchemaGuard,
}

impl TestDatabase {
    /// A migrated schema on [`test_database_url`], on the database clock.
    ///
    /// # Errors
    /// Database errors (no server, no `test` database).
    pub async fn new() -> Result<Self, Error> {
        Self::builder().build().await
    }

    /// A migrated schema with a clock of your choice (a `ManualClock` to pin
    /// time; [`TestDatabase::manual_clock`] hands it back).
    ///
    /// # Errors
    /// Database errors.
    pub async fn with_clock(clock: Clock) -> Result<Self, Error> {
        Self::builder().clock(clock).build().await
    }

    /// A migrated schema on a [`ManualClock`] pinned at `start`.
    ///
    /// # Errors
    /// Database errors.
    pub async fn pinned(start: DateTime<Utc>) -> Result<Self, Error> {
        Self::with_clock(Clock::Manual(ManualClock::new(start))).await
    }

    /// Options beyond the clock: another URL, the schema name's prefix and
    /// length, or no migration at all.
    #[must_use]
    pub fn builder() -> TestDatabaseBuilder {
        TestDatabaseBuilder::default()
    }

    /// The database handle: clients and workers come from it.
    #[must_use]
    pub const fn db(&self) -> &Database {
        &self.db
    }

    /// The URL it is on, with `synchronous_commit = off` as a session option
    /// unless built with [`TestDatabaseBuilder::durable_commits`].
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its schema.
    #[must_use]
    pub fn schema(&self) -> &Schema {
        self.db.schema()
    }

    /// The pinned clock, when it runs on one: [`ManualClock::advance`] moves
    /// the time its clients and workers see.
    #[must_use]
    pub fn manual_clock(&self) -> Option<&ManualClock> {
        match self.db.clock() {
            Clock::Manual(clock) => Some(clock),
            Clock::Database => None,
        }
    }

    /// `sql` with `{schema}` replaced by the quoted schema name, as in
    /// pgbus's migrations.
    #[must_use]
    pub fn sql(&self, sql: &str) -> String {
        render(sql, self.schema().as_str())
    }

    /// Another handle on the same schema and clock with a pool of its own:
    /// what a second process would have.
    ///
    /// # Errors
    /// Database errors.
    pub async fn connect_again(&self) -> Result<Database, Error> {
        Database::connect_with(&self.url, self.schema().clone(), self.db.clock().clone()).await
    }

    /// A plain connection of its own to the same database (see
    /// [`connect_raw`]); name the schema in its statements ([`Self::sql`]).
    ///
    /// # Errors
    /// Database errors.
    pub async fn raw_client(&self) -> Result<tokio_postgres::Client, Error> {
        connect_raw(&raw_config(&self.url)?).await
    }
}

/// Builds a [`TestDatabase`]; from [`TestDatabase::builder`].
#[derive(Debug, Clone)]
pub struct TestDatabaseBuilder {
    url: Option<String>,
    clock: Clock,
    prefix: String,
    name_len: usize,
    migrated: bool,
    durable: bool,
}

impl Default for TestDatabaseBuilder {
    fn default() -> Self {
        Self {
            url: None,
            clock: Clock::Database,
            prefix: "t".to_owned(),
            name_len: 0,
            migrated: true,
            durable: false,
        }
    }
}

impl TestDatabaseBuilder {
    /// The database, instead of [`test_database_url`].
    #[must_use]
    pub fn url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
    }

    /// The clock (default: the database's).
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The schema name's prefix, before `_<32 hex digits>` (default `t`): a
    /// valid schema name itself, e.g. `bench`.
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// Pads the schema name with `x` to `len` bytes (for tests of the longest
    /// name, [`pgbus_runtime::MAX_SCHEMA_NAME_LEN`]); shorter is no change.
    #[must_use]
    pub const fn name_len(mut self, len: usize) -> Self {
        self.name_len = len;
        self
    }

    /// Creates nothing: the schema's name and a connection only, for tests of
    /// the migration itself. It is still dropped afterwards, when it exists.
    #[must_use]
    pub const fn unmigrated(mut self) -> Self {
        self.migrated = false;
        self
    }

    /// Commits as the server is configured to (by default `synchronous_commit
    /// = on`: each commit waits for its WAL to reach the disk). Without this,
    /// the connections of a test database commit with `synchronous_commit =
    /// off` (see [`TestDatabase`]): for a benchmark, or a test of what a
    /// server crash keeps.
    #[must_use]
    pub const fn durable_commits(mut self) -> Self {
        self.durable = true;
        self
    }

    /// Connects and, unless [`Self::unmigrated`], copies the template into a
    /// schema of its own (migrating the template first if this is its first
    /// use).
    ///
    /// # Errors
    /// [`Error::InvalidSchema`] for a prefix or length that makes an invalid
    /// name, and database errors.
    pub async fn build(self) -> Result<TestDatabase, Error> {
        let mut url = self.url.unwrap_or_else(test_database_url);
        if !self.durable {
            url = with_fast_commits(&url);
        }
        let mut name = format!("{}_{}", self.prefix, uuid::Uuid::new_v4().simple());
        while name.len() < self.name_len {
            name.push('x');
        }
        let schema = Schema::new(&name)?;
        // The guard exists before anything is created, so a failure half way
        // leaves nothing behind.
        let guard = SchemaGuard {
            url: url.clone(),
            schema: name,
        };
        if self.migrated {
            ensure_template(&url).await?;
        }
        let db = Database::connect_with(&url, schema, self.clock).await?;
        if self.migrated {
            // On the pool's connection, which the test then reuses.
            let client = db.pool().get().await?;
            client
                .batch_execute(&copy_sql(db.schema().as_str()))
                .await?;
        }
        Ok(TestDatabase {
            db,
            url,
            _guard: guard,
        })
    }
}

/// `url` with the session option `synchronous_commit = off`, unless it names
/// `options` of its own or `PGOPTIONS` is set (the caller's own session
/// options win). For a URL (`postgres://...`) a query parameter, for a
/// key=value string one more pair.
fn with_fast_commits(url: &str) -> String {
    let own_options = std::env::var("PGOPTIONS").is_ok_and(|options| !options.is_empty());
    if own_options || url.contains("options=") {
        return url.to_owned();
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let joiner = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joiner}options=-c%20synchronous_commit%3Doff")
    } else {
        format!("{url} options='-c synchronous_commit=off'")
    }
}

/// The template of this build's migrations: `pgbus_tmpl_` and the first 16
/// hex digits of a SHA-256 over every migration's version, name and checksum.
fn template_schema() -> String {
    let mut set = String::new();
    for m in MIGRATIONS {
        let _ = writeln!(set, "{} {} {}", m.version, m.name, m.checksum());
    }
    let digest = pgbus_core::sha256_hex(set.as_bytes());
    format!("pgbus_tmpl_{}", &digest[..16])
}

/// The URLs whose template this process has seen migrated.
static TEMPLATES_READY: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Migrates the template on `url` unless this process did already. Two
/// threads may both get here first: pgbus's migration lock makes the second
/// wait and then find nothing to apply. So do other processes.
async fn ensure_template(url: &str) -> Result<(), Error> {
    let ready = |urls: &Vec<String>| urls.iter().any(|u| u == url);
    if ready(
        &TEMPLATES_READY
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    ) {
        return Ok(());
    }
    let template = Database::builder(url)
        .schema(Schema::new(&template_schema())?)
        .pool_size(1)
        .connect()
        .await?;
    template.migrate().await?;
    let mut urls = TEMPLATES_READY
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if !ready(&urls) {
        urls.push(url.to_owned());
    }
    Ok(())
}

/// One transaction that makes `schema` a copy of the template: every
/// migration's SQL, then the template's bookkeeping table and its rows (as
/// pgbus's migration made them, so the copy reads as migrated).
fn copy_sql(schema: &str) -> String {
    let template = template_schema();
    let mut sql = String::from(
        "BEGIN;\n\
         SET LOCAL client_min_messages = warning;\n\
         CREATE SCHEMA {schema};\n",
    );
    for migration in MIGRATIONS {
        sql.push_str(migration.sql);
        sql.push_str(";\n");
    }
    let _ = write!(
        sql,
        "CREATE TABLE {{schema}}.pgbus_migrations (LIKE \"{template}\".pgbus_migrations INCLUDING ALL);\n\
         INSERT INTO {{schema}}.pgbus_migrations SELECT * FROM \"{template}\".pgbus_migrations;\n\
         COMMIT;"
    );
    render(&sql, schema)
}

/// `sql` with `{schema}` replaced by the quoted `schema` (a validated name:
/// safe to splice).
fn render(sql: &str, schema: &str) -> String {
    sql.replace("{schema}", &format!("\"{schema}\""))
}

/// Drops its schema, with everything in it, when dropped.
#[derive(Debug)]
struct SchemaGuard {
    url: String,
    schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // Drop may run inside a runtime, or while a panic unwinds: use a
        // thread with a runtime and a connection of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let config = raw_config(&url).map_err(|e| e.to_string())?;
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
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
            Ok(Err(error)) => eprintln!("could not drop schema {}: {error}", self.schema),
            Err(_) => eprintln!("could not drop schema {}: the thread panicked", self.schema),
        }
    }
}
