//! What the `pgbus` binary's tests share: a schema of their own (the
//! testkit's `TestDatabase`), the binary run on it, and the dashboard binary.

use std::process::Output;

use pgbus_runtime::{Database, RunId, RunStatus};
use pgbus_testkit::TestDatabase;

pub(crate) fn database_url() -> String {
    pgbus_testkit::test_database_url()
}

/// A schema of one test, dropped when the test ends.
pub(crate) struct TestSchema {
    pub(crate) name: String,
    pub(crate) db: Database,
    /// The schema's owner: dropping it drops the schema.
    pub(crate) database: TestDatabase,
}

impl TestSchema {
    /// A migrated schema (a copy of the testkit's template), and a handle on
    /// it, on the database clock.
    pub(crate) async fn new() -> Self {
        Self::of(TestDatabase::new().await.expect("a test schema"))
    }

    /// A schema nothing created yet, for `pgbus migrate` to make.
    pub(crate) async fn unmigrated() -> Self {
        let database = TestDatabase::builder().unmigrated().build().await;
        Self::of(database.expect("a test schema name"))
    }

    fn of(database: TestDatabase) -> Self {
        Self {
            name: database.schema().as_str().to_owned(),
            db: database.db().clone(),
            database,
        }
    }

    /// Runs `pgbus args...` on this schema.
    pub(crate) fn pgbus(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
            .args(args)
            .env("DATABASE_URL", database_url())
            .env("PGBUS_SCHEMA", &self.name)
            .env_remove("PGBUS_RETENTION")
            .output()
            .expect("run pgbus")
    }

    /// `pgbus args...`, which must succeed; its standard output.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.pgbus(args);
        assert!(
            out.status.success(),
            "pgbus {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
    }

    /// `pgbus args...`, which must fail with `code`; its standard error,
    /// which must be one line.
    pub(crate) fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.pgbus(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "pgbus {args:?}: {}",
            stdout(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if code == 1 {
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            assert!(err.starts_with("pgbus: "), "{err}");
        }
        err
    }

    pub(crate) async fn execute(&self, sql: &str, run: RunId) {
        let client = self.db.pool().get().await.expect("connection");
        client
            .execute(&self.database.sql(sql), &[&run.0])
            .await
            .expect("statement");
    }

    /// `sql` (statements without parameters, `{schema}` for the schema).
    pub(crate) async fn batch(&self, sql: &str) {
        let client = self.db.pool().get().await.expect("connection");
        client
            .batch_execute(&self.database.sql(sql))
            .await
            .expect("statements");
    }

    /// A connection of its own holding `runs` of this schema locked (`LOCK
    /// TABLE` in an open transaction), as an operator in `psql` would.
    pub(crate) async fn lock_runs(&self) -> tokio_postgres::Client {
        let locker = self.database.raw_client().await.expect("connect");
        locker
            .batch_execute(&format!(
                "BEGIN; LOCK TABLE \"{}\".runs IN ACCESS EXCLUSIVE MODE",
                self.name
            ))
            .await
            .expect("lock");
        locker
    }

    /// How many lock requests on this schema's `runs` wait, seen from `by`.
    pub(crate) async fn waiting_on_runs(&self, by: &tokio_postgres::Client) -> i64 {
        by.query_one(
            &format!(
                "SELECT count(*) FROM pg_locks WHERE relation = '\"{}\".runs'::regclass AND NOT granted",
                self.name
            ),
            &[],
        )
        .await
        .expect("count")
        .get(0)
    }

    /// Failed attempts 2 to `last` of `run`'s step `step` (attempt 1 is the
    /// start's), each with one event of every kind in `events`: a long run
    /// made in one statement.
    pub(crate) async fn failed_attempts(&self, run: RunId, step: &str, last: i32, events: &[&str]) {
        let client = self.db.pool().get().await.expect("connection");
        let sql = "WITH attempts AS (
                 INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, outcome,
                     queue, priority, scheduled_at, started_at, finished_at, error_class,
                     error_message, created_at)
                 SELECT r.id, r.workflow, $2, n, 'failed', 'reattempted', 'default', 0,
                     now(), now(), now(), 'Flaky', 'attempt ' || n, now()
                 FROM {schema}.runs AS r, generate_series(2, $3) AS n WHERE r.id = $1
                 RETURNING id, attempt
             )
             INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
             SELECT $1, id, $2, attempt, kind, 'worker', now()
             FROM attempts, unnest($4::text[]) AS kind";
        client
            .execute(&self.database.sql(sql), &[&run.0, &step, &last, &events])
            .await
            .expect("attempts");
    }

    /// Moves `run`'s creation two hours back.
    pub(crate) async fn backdate(&self, run: RunId) {
        self.execute(
            "UPDATE {schema}.runs SET created_at = now() - interval '2 hours' WHERE id = $1",
            run,
        )
        .await;
    }

    pub(crate) async fn status(&self, run: RunId) -> RunStatus {
        self.db.client().run(run).await.expect("run").run.status
    }
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON output")
}

/// The dashboard binary on a free port of loopback, on `schema`.
pub(crate) struct Dashboard {
    child: std::process::Child,
    pub(crate) url: String,
    /// The link with the token it made, when it made one.
    pub(crate) link: Option<String>,
}

impl Dashboard {
    /// Started with `extra` arguments after `dashboard --bind 127.0.0.1:0`,
    /// and `--no-token` unless `extra` gives a token or a public origin.
    pub(crate) fn start(schema: &str, extra: &[&str]) -> Self {
        let given = extra
            .iter()
            .any(|a| ["--token", "--token-file", "--public-origin"].contains(a));
        let mut args = extra.to_vec();
        if !given {
            args.push("--no-token");
        }
        Self::start_as_given(schema, &args)
    }

    /// Started with `extra` arguments after `dashboard --bind 127.0.0.1:0`
    /// and nothing more.
    pub(crate) fn start_as_given(schema: &str, extra: &[&str]) -> Self {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
            .args(["dashboard", "--bind", "127.0.0.1:0"])
            .args(extra)
            .env("DATABASE_URL", database_url())
            .env("PGBUS_SCHEMA", schema)
            .env_remove("PGBUS_DASHBOARD_TOKEN")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the dashboard");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
            child.stderr.take().expect("stderr"),
        ));
        let first = lines.next().expect("a first line").expect("readable");
        let url = first
            .strip_prefix("pgbus dashboard on ")
            .unwrap_or_else(|| panic!("the dashboard said: {first}"))
            .trim_end_matches('/')
            .to_owned();
        // It makes a token unless given one (an empty `--token` is none).
        let given = extra
            .windows(2)
            .any(|w| w[0] == "--token" && !w[1].is_empty());
        let made = !given
            && !extra
                .iter()
                .any(|a| ["--token-file", "--no-token"].contains(a));
        let link = made.then(|| {
            let second = lines.next().expect("a second line").expect("readable");
            second
                .strip_prefix("open ")
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("the dashboard said: {second}"))
                .to_owned()
        });
        Self { child, url, link }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
