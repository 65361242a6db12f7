//! Connection loss: a worker whose backends are terminated, or whose server goes
//! away and comes back, reconnects, finishes every run with each attempt run
//! once, and logs the outage once rather than once per try.
//!
//! Each test's connections carry an `application_name` of their own, so the test
//! terminates only its own backends while the rest of the suite runs beside it on
//! the same server. The server itself is never restarted here: a test proxy
//! stands in for it going away (the chaos test restarts a private server).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, RunStatus, Worker};
use tokio::sync::watch;

use crate::pg::{TestDb, database_url, eventually, steps};

/// How often each attempt's body ran, by (run, step, attempt).
type Executions = Arc<Mutex<HashMap<(i64, String, u32), u32>>>;

/// Bodies that count their runs per attempt, and whose first step waits at a gate.
#[derive(Clone)]
struct Gated {
    entered: Arc<AtomicUsize>,
    gate: watch::Receiver<bool>,
    executions: Executions,
}

impl Gated {
    fn new() -> (Self, watch::Sender<bool>) {
        let (open, gate) = watch::channel(false);
        let gated = Self {
            entered: Arc::default(),
            gate,
            executions: Arc::default(),
        };
        (gated, open)
    }

    fn ran(&self, cx: &StepCx<()>) {
        *self
            .executions
            .lock()
            .unwrap()
            .entry((cx.run_id().0, cx.step().to_owned(), cx.attempt()))
            .or_default() += 1;
    }

    /// Every body that ran, and how often; each should have run once.
    fn executions(&self) -> Vec<u32> {
        self.executions.lock().unwrap().values().copied().collect()
    }
}

#[workflow(name = "connection.gated")]
impl Gated {
    #[step]
    async fn first(&self, cx: &mut StepCx<()>) {
        self.ran(cx);
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
    }

    #[step]
    async fn second(&self, cx: &mut StepCx<()>) {
        self.ran(cx);
    }
}

/// `url` with `application_name` set to `name`.
fn with_application_name(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

/// A name for this test's connections, unique to it.
fn application_name(t: &TestDb) -> String {
    format!("pgbus_{}", t.schema())
}

/// Runs `worker` until the returned sender says stop.
fn spawn_worker(worker: &Worker) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, mut stopped) = watch::channel(false);
    let worker = worker.clone();
    let running = tokio::spawn(async move {
        worker
            .run_until(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await
            .expect("run_until");
    });
    (stop, running)
}

async fn finished(t: &TestDb, runs: &[RunId]) -> bool {
    for run in runs {
        if t.run(*run).await.run.status != RunStatus::Finished {
            return false;
        }
    }
    true
}

/// Asserts that every run finished with one attempt of each step and no late
/// completion, and that each body ran once.
async fn assert_each_attempt_ran_once(t: &TestDb, runs: &[RunId], gated: &Gated) {
    for run in runs {
        let view = t.run(*run).await;
        assert_eq!(view.run.status, RunStatus::Finished);
        assert_eq!(
            steps(&view),
            [
                "first#1 completed/completed",
                "second#1 completed/completed"
            ]
        );
        assert!(
            view.events
                .iter()
                .all(|e| e.event != "late_completion_ignored"),
            "{:?}",
            crate::pg::events(&view)
        );
    }
    let executions = gated.executions();
    assert_eq!(executions.len(), runs.len() * 2, "{executions:?}");
    assert!(executions.iter().all(|n| *n == 1), "{executions:?}");
}

#[tokio::test]
async fn a_worker_whose_backends_are_terminated_reconnects_and_loses_nothing() {
    let logs = Logs::capture();
    let _capturing = tracing::subscriber::set_default(logs.clone());
    let t = TestDb::new().await;
    let name = application_name(&t);
    let db = Database::connect_with(
        &with_application_name(&database_url(), &name),
        t.db.schema().clone(),
        t.db.clock().clone(),
    )
    .await
    .expect("connect");
    let (gated, open) = Gated::new();
    let worker = db
        .worker()
        .register(gated.clone())
        .concurrency(2)
        .poll_interval(Duration::from_millis(20))
        .build()
        .expect("worker");
    let runs = [
        t.client().start::<Gated>(&()).await.expect("start").run_id,
        t.client().start::<Gated>(&()).await.expect("start").run_id,
    ];
    let (stop, running) = spawn_worker(&worker);

    // Both first steps run, so the worker sits idle with its connections open:
    // pooled ones and the one that listens for wake-ups.
    assert!(
        eventually(Duration::from_secs(10), || async {
            gated.entered.load(Ordering::SeqCst) == 2
        })
        .await
    );
    let backends = || async {
        t.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .await
        .iter()
        .map(|row| row.get::<_, i32>(0))
        .collect::<Vec<i32>>()
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            backends().await.len() >= 2
        })
        .await,
        "a pooled connection and the listener"
    );
    let terminated = backends().await;
    for pid in &terminated {
        t.query("SELECT pg_terminate_backend($1)", &[pid]).await;
    }
    let gone = || async {
        let now = backends().await;
        terminated.iter().all(|pid| !now.contains(pid))
    };
    assert!(eventually(Duration::from_secs(10), gone).await);
    // The listener notices, and connects again by itself.
    let listening_again = || async { logs.count("notification connection is back") == 1 };
    assert!(eventually(Duration::from_secs(10), listening_again).await);

    open.send_replace(true);
    assert!(eventually(Duration::from_secs(30), || finished(&t, &runs)).await);
    assert!(
        !backends().await.is_empty(),
        "the worker has connected again"
    );
    stop.send_replace(true);
    running.await.expect("the worker stops");

    assert_each_attempt_ran_once(&t, &runs, &gated).await;
    // The listener's session ended once and came back once; the pool checked its
    // connections before handing them out, so no statement met a dead one.
    let runtime = logs.of("pgbus_runtime");
    assert_eq!(
        logs.count("notification connection lost; polling until it is back"),
        1,
        "{runtime:#?}"
    );
    assert_eq!(
        logs.count("notification connection is back"),
        1,
        "{runtime:#?}"
    );
    assert_eq!(
        logs.count("could not record the step's outcome yet; retrying until the database answers"),
        0,
        "{runtime:#?}"
    );
    assert!(
        runtime.iter().all(|e| e.level != tracing::Level::ERROR),
        "{runtime:#?}"
    );

    // Connections whose URL names no application carry pgbus's.
    let own: String = t
        .query("SELECT current_setting('application_name')", &[])
        .await[0]
        .get(0);
    assert_eq!(own, pgbus_runtime::database::DEFAULT_APPLICATION_NAME);
}

#[tokio::test]
async fn a_worker_rides_out_an_outage_and_logs_it_once() {
    let logs = Logs::capture();
    let _capturing = tracing::subscriber::set_default(logs.clone());
    let t = TestDb::new().await;
    let proxy = Proxy::start();
    let db = Database::connect_with(
        &proxy.url(&application_name(&t)),
        t.db.schema().clone(),
        t.db.clock().clone(),
    )
    .await
    .expect("connect through the proxy");
    let (gated, open) = Gated::new();
    // One slot runs the gated body; the other keeps the claim loop polling.
    let worker = db
        .worker()
        .register(gated.clone())
        .concurrency(2)
        .notifications(false)
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_hours(1))
        .sweep_interval(Duration::from_hours(1))
        .build()
        .expect("worker");
    let runs = [t.client().start::<Gated>(&()).await.expect("start").run_id];
    let (stop, running) = spawn_worker(&worker);
    assert!(
        eventually(Duration::from_secs(10), || async {
            gated.entered.load(Ordering::SeqCst) == 1
        })
        .await
    );

    // The server goes away: open connections break, new ones are refused.
    proxy.cut();
    let claims_failed = || async { logs.count("database still failing") >= 2 };
    assert!(eventually(Duration::from_secs(10), claims_failed).await);
    // The body ends while the server is away; its outcome is retried for longer
    // than the six tries the worker used to give it.
    open.send_replace(true);
    let outcome_retried = || async { logs.count("still cannot record the step's outcome") >= 6 };
    assert!(eventually(Duration::from_secs(30), outcome_retried).await);
    assert!(proxy.refused() >= 7);
    proxy.restore();

    assert!(eventually(Duration::from_secs(30), || finished(&t, &runs)).await);
    stop.send_replace(true);
    running.await.expect("the worker stops");

    assert_each_attempt_ran_once(&t, &runs, &gated).await;
    // One line when the outage began and one when it ended, for the claim loop
    // and for the outcome alike, however many tries failed between.
    let runtime = logs.of("pgbus_runtime");
    for (message, times) in [
        ("database unavailable; retrying with backoff", 1),
        ("database answers again", 1),
        (
            "could not record the step's outcome yet; retrying until the database answers",
            1,
        ),
        (
            "the database answers again; the step's outcome is settled",
            1,
        ),
    ] {
        assert_eq!(logs.count(message), times, "{message}: {runtime:#?}");
    }
    assert!(
        runtime
            .iter()
            .filter(|e| e.level <= tracing::Level::WARN)
            .count()
            == 2,
        "{runtime:#?}"
    );
}

/// A TCP proxy in front of the test server that can drop every connection and
/// refuse new ones, as a server that went away does, and then let them through
/// again.
struct Proxy {
    port: u16,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    down: AtomicBool,
    closed: AtomicBool,
    refused: AtomicUsize,
    open: Mutex<Vec<TcpStream>>,
}

impl Proxy {
    fn start() -> Self {
        let config: tokio_postgres::Config = database_url().parse().expect("a test URL");
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream = format!("{host}:{port}");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("an address").port();
        let state = Arc::new(ProxyState::default());
        let accepting = Arc::clone(&state);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.closed.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                if accepting.down.load(Ordering::SeqCst) {
                    accepting.refused.fetch_add(1, Ordering::SeqCst);
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let mut open = accepting.open.lock().unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.flush();
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
                open.extend([client, server]);
            }
        });
        Self { port, state }
    }

    /// A connection string through the proxy, with the test server's user and
    /// database.
    fn url(&self, application_name: &str) -> String {
        // The user the pool would log in as, named: the string is the URL's
        // settings moved onto the proxy's port.
        let config = pgbus_testkit::raw_config(&database_url()).expect("a test URL");
        let dbname = config.get_dbname().unwrap_or("postgres");
        let mut url = format!(
            "host=127.0.0.1 port={} dbname={dbname} application_name={application_name}",
            self.port
        );
        if let Some(user) = config.get_user() {
            let _ = write!(url, " user={user}");
        }
        if let Some(password) = config.get_password() {
            let _ = write!(url, " password={}", String::from_utf8_lossy(password));
        }
        url
    }

    /// Breaks every open connection and refuses new ones.
    fn cut(&self) {
        self.state.down.store(true, Ordering::SeqCst);
        for stream in self.state.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    fn restore(&self) {
        self.state.down.store(false, Ordering::SeqCst);
    }

    /// How many connections were refused while down.
    fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.state.closed.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees `closed`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One captured `tracing` event.
#[derive(Debug, Clone)]
struct Logged {
    level: tracing::Level,
    target: String,
    message: String,
}

/// A `tracing` subscriber that keeps every event. Installed as the test thread's
/// default on a current-thread runtime, it sees the worker's tasks (they run on
/// that thread) and nothing of the tests running beside it.
#[derive(Clone, Default)]
pub(crate) struct Logs {
    events: Arc<Mutex<Vec<Logged>>>,
    spans: Arc<AtomicU64>,
}

impl Logs {
    pub(crate) fn capture() -> Self {
        Self::default()
    }

    /// Events from targets starting with `target`.
    fn of(&self, target: &str) -> Vec<Logged> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.target.starts_with(target))
            .cloned()
            .collect()
    }

    /// How many of pgbus's events carry exactly this message.
    pub(crate) fn count(&self, message: &str) -> usize {
        self.of("pgbus_runtime")
            .iter()
            .filter(|e| e.message == message)
            .count()
    }
}

struct MessageOf<'a>(&'a mut String);

impl tracing::field::Visit for MessageOf<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Logs {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.spans.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut MessageOf(&mut message));
        self.events.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message,
        });
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn engine_connections_run_without_jit_unless_the_url_asks_for_it() {
    let t = TestDb::new().await;
    let setting = |db: Database, name: &'static str| async move {
        let client = db.pool().get().await.expect("a pooled connection");
        let value: String = client
            .query_one("SELECT current_setting($1)", &[&name])
            .await
            .expect("read the setting")
            .get(0);
        value
    };
    let connect = |query: &'static str| {
        let url = format!(
            "{}{}{query}",
            database_url(),
            if database_url().contains('?') {
                "&"
            } else {
                "?"
            }
        );
        let (schema, clock) = (t.db.schema().clone(), t.db.clock().clone());
        async move {
            Database::connect_with(&url, schema, clock)
                .await
                .expect("connect")
        }
    };

    let plain = connect("application_name=jit_plain").await;
    assert_eq!(setting(plain, "jit").await, "off");

    // Options the URL sets are kept beside it, and can turn it back on.
    let tuned = connect("options=-c%20work_mem%3D5MB").await;
    assert_eq!(setting(tuned.clone(), "work_mem").await, "5MB");
    assert_eq!(setting(tuned, "jit").await, "off");
    let on = connect("options=-c%20jit%3Don").await;
    assert_eq!(setting(on, "jit").await, "on");
}
