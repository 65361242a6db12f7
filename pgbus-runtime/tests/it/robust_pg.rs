//! What a fresh user's review threw at the worker: data the driver cannot read
//! back, errors whose `Display` fails. Each must end as a step error for the
//! policies, never as a panic or a stuck row.

use std::fmt;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus};
use serde_json::Value;

use crate::pg::TestDb;

fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::from(0), |inner, _| Value::Array(vec![inner]))
}

struct Deep;

#[workflow(name = "robust.deep", input = u8)]
impl Deep {
    #[step]
    async fn produce(&self, cx: &mut StepCx<u8>) -> StepResult {
        if *cx.input() == 1 {
            cx.output(&nested(300))?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn consume(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_the_driver_cannot_read_back_pauses_the_run_and_nothing_else() {
    let t = TestDb::new().await;
    let client = t.client();
    let deep = client.start::<Deep>(&1).await.expect("start").run_id;
    let plain = client.start::<Deep>(&2).await.expect("start").run_id;
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Deep)
            .build()
            .expect("worker");

    worker.run_until_idle().await.expect("the worker survives");

    let sql = "SELECT status, coalesce(error_class, '') FROM {schema}.runs WHERE id = $1";
    let deep_row = t.query(sql, &[&deep.0]).await;
    assert_eq!(
        deep_row[0].get::<_, String>(0),
        "paused",
        "the next claim could not read the outputs"
    );
    assert!(deep_row[0].get::<_, String>(1).ends_with("Unstorable"));
    let plain_row = t.query(sql, &[&plain.0]).await;
    assert_eq!(
        plain_row[0].get::<_, String>(0),
        "finished",
        "other runs go on"
    );
    // Reading the run back is a typed error, not a panic.
    assert!(matches!(client.run(deep).await, Err(Error::Corrupt(_))));
    assert_eq!(t.run(plain).await.run.status, RunStatus::Finished);
}

#[derive(Debug)]
struct BadDisplay;

impl fmt::Display for BadDisplay {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Err(fmt::Error)
    }
}

impl std::error::Error for BadDisplay {}

struct Rude;

#[workflow(name = "robust.rude")]
impl Rude {
    #[step(on_exception(action = "skip"))]
    async fn fail(&self, _cx: &mut StepCx<()>) -> Result<(), BadDisplay> {
        Err(BadDisplay)
    }
}

#[tokio::test]
async fn an_error_whose_display_fails_is_still_recorded() {
    let t = TestDb::new().await;
    let run = t.client().start::<Rude>(&()).await.expect("start").run_id;
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Rude)
            .build()
            .expect("worker");
    worker.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(
        view.run.status,
        RunStatus::Finished,
        "skipped by its policy"
    );
    assert_eq!(
        view.steps[0].error_message.as_deref(),
        Some("<the error's Display implementation failed>")
    );
}

/// A step that signals when its body runs and finishes when the test says.
struct Held;

static ENTERED: std::sync::LazyLock<tokio::sync::Notify> =
    std::sync::LazyLock::new(tokio::sync::Notify::new);
static RELEASE: std::sync::LazyLock<tokio::sync::Notify> =
    std::sync::LazyLock::new(tokio::sync::Notify::new);

#[workflow(name = "robust.held")]
impl Held {
    #[step]
    async fn hold(&self, _cx: &mut StepCx<()>) {
        ENTERED.notify_one();
        RELEASE.notified().await;
    }
}

/// The worker's log lines, for a test to wait on.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Lines {
    fn holds(&self, text: &str) -> bool {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).contains(text)
    }
}

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Drops the test's role when dropped, its sessions ended first, also when the
/// test panics.
struct RoleGuard(String);

impl Drop for RoleGuard {
    fn drop(&mut self) {
        let role = self.0.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let Ok(config) = pgbus_testkit::raw_config(&crate::pg::database_url()) else {
                    return;
                };
                let Ok(client) = pgbus_testkit::connect_raw(&config).await else {
                    return;
                };
                let _ = client
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1",
                        &[&role],
                    )
                    .await;
                let _ = client
                    .batch_execute(&format!("DROP ROLE IF EXISTS \"{role}\""))
                    .await;
            });
        })
        .join();
    }
}

/// A step's outcome that meets a server refusing new connections (here a role
/// that may no longer log in, as after a rotated password; SQLSTATE 28000, not
/// an outage) is not an outcome the database refused: it waits for a
/// connection, as in an outage, and is recorded once the login works again.
/// The run finishes; it is not paused with `Unstorable`.
#[tokio::test]
async fn an_outcome_that_meets_a_refused_login_waits_for_a_connection() {
    let t = TestDb::new().await;
    let role = format!("pgbus_it_{}", uuid::Uuid::new_v4().simple());
    let _role = RoleGuard(role.clone());
    t.execute(&format!("CREATE ROLE \"{role}\" LOGIN SUPERUSER"), &[])
        .await;
    let url = crate::pg::database_url();
    let separator = if url.contains('?') { '&' } else { '?' };
    let db = pgbus_runtime::Database::connect_with(
        &format!("{url}{separator}user={role}"),
        t.db.schema().clone(),
        t.db.clock().clone(),
    )
    .await
    .expect("connect as the test's role");

    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    // This test's runtime has one thread, so the worker's tasks log here.
    let _logging = tracing::subscriber::set_default(subscriber);

    let run = t.client().start::<Held>(&()).await.expect("start").run_id;
    let worker = db
        .worker()
        .notifications(false)
        .register(Held)
        .build()
        .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let working = tokio::spawn(async move {
        worker
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });
    ENTERED.notified().await;

    // Mid-step: the role may no longer log in, and its sessions end.
    t.execute(&format!("ALTER ROLE \"{role}\" NOLOGIN"), &[])
        .await;
    t.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1",
        &[&role],
    )
    .await;
    RELEASE.notify_one();
    assert!(
        crate::pg::eventually(std::time::Duration::from_secs(10), || async {
            lines.holds("could not record the step's outcome yet")
        })
        .await,
        "the outcome waits for a connection"
    );

    t.execute(&format!("ALTER ROLE \"{role}\" LOGIN"), &[])
        .await;
    assert!(
        crate::pg::eventually(std::time::Duration::from_secs(10), || async {
            t.run(run).await.run.status == RunStatus::Finished
        })
        .await,
        "the outcome is recorded once the login works"
    );
    let view = t.run(run).await;
    assert_eq!(view.steps.len(), 1, "one attempt");
    assert!(!lines.holds("could not be stored"));
    let _ = stop.send(());
    working
        .await
        .expect("the worker task")
        .expect("the worker stops");
    drop(db);
}

struct Forger;

#[workflow(name = "robust.forger")]
impl Forger {
    #[step]
    async fn fail(&self, _cx: &mut StepCx<()>) -> StepResult {
        Err(StepError::msg(
            "bad\nFORGED ERROR pgbus_runtime: all is well\r\u{1b}[2K",
        ))
    }
}

/// A step's error message goes into the worker's log escaped: its line
/// break, carriage return and terminal escape cannot start a line of their
/// own nor act on a terminal that shows the log.
#[tokio::test]
async fn an_error_message_cannot_forge_log_lines() {
    let t = TestDb::new().await;
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let run = t.client().start::<Forger>(&()).await.expect("start").run_id;
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Forger)
            .build()
            .expect("worker");
    worker.run_until_idle().await.expect("run");
    assert_eq!(t.run(run).await.run.status, RunStatus::Paused);

    let log = {
        let bytes = lines
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    };
    assert!(log.contains("step failed"), "{log}");
    assert!(log.contains(r"bad\nFORGED ERROR"), "{log}");
    assert!(!log.contains('\r') && !log.contains('\u{1b}'), "{log}");
    assert!(!log.lines().any(|line| line.starts_with("FORGED")), "{log}");
}
