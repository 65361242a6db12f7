//! TLS and connection settings against real servers: the local one (`ssl = on`
//! with Debian's snakeoil certificate) and a private cluster with a CA and a
//! server certificate made here, `hostssl` and SCRAM only. Every failure is a
//! typed error, and none hangs: each is bounded by the connect timeout.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, Error, RunStatus, SslMode};
use tokio::sync::watch;

use crate::pg::{TestDb, database_url, eventually};
use crate::tls_cluster::{Ca, TlsCluster};

struct Noop;

#[workflow(name = "tls.noop")]
impl Noop {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// `url` with `params` (`a=b&c=d`) added to its query.
fn with_params(url: &str, params: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{params}")
}

/// Connects with a short connect timeout, and asserts it ended within it.
async fn connect(url: &str) -> Result<Database, Error> {
    let began = Instant::now();
    let result = Database::builder(url)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    assert!(
        began.elapsed() < Duration::from_secs(12),
        "connecting to {url} took {:?}",
        began.elapsed()
    );
    result
}

/// The backends with `application_name`: pid, whether TLS, and the last
/// query.
async fn backends(db: &Database, application_name: &str) -> Vec<(i32, bool, String)> {
    let client = db.pool().get().await.expect("a connection");
    client
        .query(
            "SELECT a.pid, s.ssl, a.query FROM pg_stat_activity a
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&application_name],
        )
        .await
        .expect("read pg_stat_activity")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

/// Whether the pool's connection reports TLS.
async fn encrypted(db: &Database) -> bool {
    let client = db.pool().get().await.expect("a connection");
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("read pg_stat_ssl")
        .get(0)
}

/// Runs a worker of `db` with one run of [`Noop`] until the worker's pool,
/// upkeep and `LISTEN` connections all show under `name`; asserts they are
/// all encrypted.
async fn assert_worker_connections_encrypted(db: &Database, name: &str) {
    let worker = db
        .worker()
        .register(Noop)
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(50))
        .build()
        .expect("worker");
    let run = db.client().start::<Noop>(&()).await.expect("start").run_id;
    let (stop, mut stopped) = watch::channel(false);
    let running = tokio::spawn({
        let worker = worker.clone();
        async move {
            worker
                .run_until(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await
        }
    });
    let all_there = eventually(Duration::from_secs(20), || async {
        let finished = db.client().run(run).await.expect("run").run.status == RunStatus::Finished;
        let seen = backends(db, name).await;
        let listen = seen.iter().any(|(_, _, query)| query.starts_with("LISTEN"));
        let heartbeat = seen
            .iter()
            .any(|(_, _, query)| query.contains("A worker is alive"));
        finished && listen && heartbeat
    })
    .await;
    let seen = backends(db, name).await;
    stop.send(true).expect("stop");
    running.await.expect("join").expect("run_until");
    assert!(
        all_there,
        "the run, LISTEN and heartbeat backends: {seen:?}"
    );
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.iter().all(|(_, ssl, _)| *ssl),
        "every backend encrypted: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_on_the_local_server_encrypts_the_pool_the_listener_and_the_upkeep() {
    let t = TestDb::new().await;
    let name = format!("tls_{}", t.schema());
    let db = Database::builder(&with_params(&database_url(), "sslmode=require"))
        .schema(t.db.schema().clone())
        .clock(pgbus_runtime::Clock::Database)
        .application_name(&name)
        .connect()
        .await
        .expect("connect with sslmode=require");
    assert!(encrypted(&db).await);
    assert_worker_connections_encrypted(&db, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_cluster_checks_certificates_as_libpq_does() {
    let cluster = TlsCluster::start();
    let ca = cluster.file("ca.pem", &cluster.ca.pem());
    let other_ca = cluster.file("other-ca.pem", &Ca::new("some other CA").pem());
    let root = |path: &std::path::Path| format!("sslrootcert={}", path.display());

    // verify-full with the right root and the certificate's name.
    let db = connect(&cluster.url(
        "localhost",
        &format!(
            "sslmode=verify-full&{}&application_name=tls_full",
            root(&ca)
        ),
    ))
    .await
    .expect("verify-full with the right root");
    assert!(encrypted(&db).await);
    db.migrate().await.expect("migrate");
    assert_worker_connections_encrypted(&db, "tls_full").await;

    // require without a root does not verify; prefer (the default) and allow
    // end up encrypted, since the cluster lets in only TLS.
    for mode in ["require", "prefer", "allow"] {
        let db = connect(&cluster.url("127.0.0.1", &format!("sslmode={mode}")))
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        assert!(encrypted(&db).await, "sslmode={mode}");
    }
    let db = connect(&cluster.url("localhost", ""))
        .await
        .expect("default sslmode");
    assert!(encrypted(&db).await);

    // verify-ca checks the chain only: a name the certificate lacks passes.
    let db = connect(&cluster.url("127.0.0.1", &format!("sslmode=verify-ca&{}", root(&ca))))
        .await
        .expect("verify-ca with another host name");
    assert!(encrypted(&db).await);

    // A wrong root fails the chain check, under verify-full and verify-ca, and
    // under require with a root (which is verify-ca, as in libpq).
    for mode in ["verify-full", "verify-ca", "require"] {
        match connect(&cluster.url("localhost", &format!("sslmode={mode}&{}", root(&other_ca))))
            .await
        {
            Err(Error::CertificateNotTrusted {
                host, port, reason, ..
            }) => {
                assert_eq!((host.as_str(), port), ("localhost", cluster.port));
                assert!(reason.contains("not signed by a CA"), "{reason}");
            }
            other => panic!("sslmode={mode} with a wrong root: {other:?}"),
        }
    }

    // The right root, a host name the certificate does not give.
    match connect(&cluster.url("127.0.0.1", &format!("sslmode=verify-full&{}", root(&ca)))).await {
        Err(error @ Error::HostNameMismatch { .. }) => {
            let text = error.to_string();
            let Error::HostNameMismatch {
                host,
                port,
                presented,
                ..
            } = error
            else {
                unreachable!()
            };
            assert_eq!((host.as_str(), port), ("127.0.0.1", cluster.port));
            // The names bare, not as rustls debug-prints them.
            assert!(
                presented.iter().any(|name| name == "localhost"),
                "{presented:?}"
            );
            assert!(text.contains("(it names localhost"), "{text}");
            assert!(text.contains("127.0.0.1"), "{text}");
            assert!(text.contains("verify-ca"), "{text}");
        }
        other => panic!("verify-full with a wrong host name: {other:?}"),
    }

    // A plain connection where pg_hba.conf has only hostssl lines.
    match connect(&cluster.url("127.0.0.1", "sslmode=disable")).await {
        Err(error @ Error::TlsRequired { .. }) => {
            assert!(error.to_string().contains("sslmode=require"), "{error}");
        }
        other => panic!("sslmode=disable against hostssl only: {other:?}"),
    }

    // A wrong password.
    let wrong = format!(
        "postgres://postgres:wrong@localhost:{}/postgres?sslmode=require",
        cluster.port
    );
    match connect(&wrong).await {
        Err(Error::WrongPassword {
            host, port, user, ..
        }) => {
            assert_eq!(
                (host.as_str(), port, user.as_str()),
                ("localhost", cluster.port, "postgres")
            );
        }
        other => panic!("a wrong password: {other:?}"),
    }
    // No password at all.
    let none = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=require",
        cluster.port
    );
    match Database::builder(&none)
        .env_lookup(|_| None)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
    {
        Err(Error::PasswordMissing { user, .. }) => assert_eq!(user, "postgres"),
        other => panic!("no password: {other:?}"),
    }
}

#[tokio::test]
async fn bad_tls_settings_fail_before_connecting() {
    // No server is asked: port 1 would refuse.
    match connect("postgres://127.0.0.1:1/db?sslmode=verify_full").await {
        Err(Error::InvalidSetting { setting, problem }) => {
            assert_eq!(setting, "sslmode");
            assert!(problem.contains("verify-full"), "{problem}");
        }
        other => panic!("a bad sslmode: {other:?}"),
    }
    match connect("postgres://127.0.0.1:1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
        .await
    {
        Err(Error::UnreadableFile { setting, path, .. }) => {
            assert_eq!(setting, "sslrootcert");
            assert_eq!(path, std::path::Path::new("/nonexistent/ca.pem"));
        }
        other => panic!("an unreadable root certificate: {other:?}"),
    }
    match connect("postgres://127.0.0.1:1/db?sslmode=require&sslcert=/nonexistent/c.pem&sslkey=/nonexistent/k.pem").await {
        Err(Error::UnreadableFile { setting, .. }) => assert_eq!(setting, "sslcert"),
        other => panic!("an unreadable client certificate: {other:?}"),
    }
}

/// A server on a loopback port that reads the SSL request and answers `N`
/// (no TLS), as a server with `ssl = off` does; or, `silent`, never answers.
fn fake_server(silent: bool) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let serving = std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut request = [0_u8; 8];
        if stream.read_exact(&mut request).is_err() {
            return;
        }
        if silent {
            // Hold the connection until the client gives up.
            let _ = stream.read(&mut [0_u8; 1]);
        } else {
            let _ = stream.write_all(b"N");
            let _ = stream.read(&mut [0_u8; 1024]);
        }
    });
    (port, serving)
}

#[tokio::test]
async fn require_against_a_server_without_tls_is_refused() {
    let (port, serving) = fake_server(false);
    match connect(&format!("postgres://u@127.0.0.1:{port}/db?sslmode=require")).await {
        Err(error @ Error::TlsRefused { .. }) => {
            let Error::TlsRefused {
                host,
                port: at,
                sslmode,
            } = &error
            else {
                unreachable!()
            };
            assert_eq!(
                (host.as_str(), *at, *sslmode),
                ("127.0.0.1", port, SslMode::Require)
            );
            assert!(error.to_string().contains("sslmode=require"), "{error}");
        }
        other => panic!("require without TLS on the server: {other:?}"),
    }
    serving.join().expect("fake server");
}

#[tokio::test]
async fn a_server_that_never_answers_ends_at_the_connect_timeout() {
    let (port, serving) = fake_server(true);
    let began = Instant::now();
    let result = Database::builder(&format!("postgres://u@127.0.0.1:{port}/db?sslmode=require"))
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .await;
    let took = began.elapsed();
    match result {
        Err(Error::ConnectTimeout {
            host,
            port: at,
            after,
        }) => {
            assert_eq!(
                (host.as_str(), at, after),
                ("127.0.0.1", port, Duration::from_millis(500))
            );
        }
        other => panic!("a silent server: {other:?}"),
    }
    assert!(took < Duration::from_secs(3), "took {took:?}");
    serving.join().expect("fake server");
}

#[tokio::test]
async fn a_refused_connection_names_the_host_and_port() {
    match connect("postgres://u@127.0.0.1:1/db?sslmode=disable").await {
        Err(error @ Error::Connect { .. }) => {
            assert!(error.is_transient());
            // Where, and what the socket said, in `Display` alone.
            let display = error.to_string();
            assert!(
                display.starts_with("could not connect to server 127.0.0.1:1: ")
                    && display.to_lowercase().contains("connection refused"),
                "{display}"
            );
        }
        other => panic!("a refused connection: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_blocked_on_a_lock_ends_at_the_statement_timeout() {
    let t = TestDb::new().await;
    let db = Database::builder(&database_url())
        .schema(t.db.schema().clone())
        .clock(t.db.clock().clone())
        .statement_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect("connect");
    let run = db.client().start::<Noop>(&()).await.expect("start").run_id;

    // Another session holds every lock on the runs table.
    let mut holder = t
        .second_connection()
        .await
        .pool()
        .get()
        .await
        .expect("a connection");
    let tx = holder.transaction().await.expect("begin");
    tx.batch_execute(&t.sql("LOCK TABLE {schema}.runs IN ACCESS EXCLUSIVE MODE"))
        .await
        .expect("lock");
    let began = Instant::now();
    let error = db
        .client()
        .run(run)
        .await
        .expect_err("blocked past the timeout");
    let took = began.elapsed();
    tx.rollback().await.expect("rollback");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let Error::Database(db_error) = &error else {
        panic!("expected a database error, got {error:?}");
    };
    assert_eq!(
        db_error.code().map(tokio_postgres::error::SqlState::code),
        Some("57014")
    );
    // `Display` alone says so, in the server's words.
    let said = error.to_string();
    assert!(
        said.contains("statement timeout (SQLSTATE 57014)"),
        "{said}"
    );
    assert!(error.is_transient(), "tried again by the engine");
    // Once the lock is gone it reads again.
    db.client().run(run).await.expect("read after the lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_holds_at_most_its_size() {
    let t = TestDb::new().await;
    let name = format!("size_{}", t.schema());
    let db = Database::builder(&database_url())
        .schema(t.db.schema().clone())
        .application_name(&name)
        .pool_size(3)
        .connect()
        .await
        .expect("connect");
    assert_eq!(db.pool().status().max_size, 3);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(db.pool().get().await.expect("a connection"));
    }
    let more = db
        .pool()
        .timeout_get(&deadpool_postgres::Timeouts {
            wait: Some(Duration::from_millis(200)),
            ..deadpool_postgres::Timeouts::default()
        })
        .await;
    assert!(
        matches!(more, Err(deadpool_postgres::PoolError::Timeout(_))),
        "a fourth connection: {more:?}"
    );
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1";
    assert_eq!(t.count(sql, &[&name]).await, 3);
    drop(held);
    assert_eq!(
        t.count(sql, &[&name]).await,
        3,
        "pooled connections stay open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_behind_an_exhausted_pool_ends_at_the_wait_timeout() {
    let t = TestDb::new().await;
    let db = Database::builder(&database_url())
        .schema(t.db.schema().clone())
        .clock(t.db.clock().clone())
        .pool_size(1)
        .pool_wait_timeout(Duration::from_millis(300))
        .connect()
        .await
        .expect("connect");
    let held = db.pool().get().await.expect("the one connection");
    let began = std::time::Instant::now();
    let waited = db.client().run(pgbus_runtime::RunId(1)).await;
    let took = began.elapsed();
    match waited {
        Err(error @ Error::Pool(deadpool_postgres::PoolError::Timeout(_))) => {
            assert!(error.is_transient());
            assert!(error.to_string().contains("wait timeout"), "{error}");
        }
        other => panic!("a call behind an exhausted pool: {other:?}"),
    }
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    drop(held);
    // Zero would wait for ever or never; it is refused by name.
    match Database::builder(&database_url())
        .pool_wait_timeout(Duration::ZERO)
        .connect()
        .await
    {
        Err(Error::InvalidSetting { setting, .. }) => assert_eq!(setting, "pool_wait_timeout"),
        other => panic!("a zero wait timeout: {other:?}"),
    }
    // A sub-millisecond statement_timeout would be sent as 0, no limit at all.
    match Database::builder(&database_url())
        .statement_timeout(Duration::from_micros(10))
        .connect()
        .await
    {
        Err(Error::InvalidSetting { setting, .. }) => assert_eq!(setting, "statement_timeout"),
        other => panic!("a 10 µs statement_timeout: {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_refuses_the_connection_is_named_with_its_words() {
    let url = format!("{}_no_such_database_here", database_url());
    match connect(&url).await {
        Err(error @ Error::Connect { .. }) => {
            // An unknown database does not come back by waiting.
            assert!(!error.is_transient());
            let text = error.to_string();
            assert!(
                text.starts_with("could not connect to server ")
                    && text.contains("does not exist (SQLSTATE 3D000)"),
                "{text}"
            );
        }
        other => panic!("an unknown database: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_handed_in_works_and_an_unmigrated_schema_fails_as_before() {
    let t = TestDb::unmigrated().await;
    let config = pgbus_testkit::raw_config(&database_url()).expect("a URL");
    let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .expect("a pool");
    let db = Database::from_pool(pool)
        .schema(t.db.schema().clone())
        .clock(t.db.clock().clone())
        .connect()
        .await
        .expect("a handed-in pool");
    assert!(db.servers().is_empty());

    let handed_in = db
        .client()
        .start::<Noop>(&())
        .await
        .expect_err("unmigrated");
    let connected = t.client().start::<Noop>(&()).await.expect_err("unmigrated");
    let code = |error: &Error| match error {
        Error::Database(error) => error.code().map(|c| c.code().to_owned()),
        other => panic!("expected a database error, got {other:?}"),
    };
    assert_eq!(code(&handed_in), Some("42P01".to_owned()));
    assert_eq!(code(&handed_in), code(&connected));

    // Migrated, a worker on it runs by polling (no LISTEN settings).
    db.migrate().await.expect("migrate");
    let run = db.client().start::<Noop>(&()).await.expect("start").run_id;
    let worker = db.worker().register(Noop).build().expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(
        db.client().run(run).await.expect("run").run.status,
        RunStatus::Finished
    );
}

#[tokio::test]
async fn settings_that_do_not_apply_are_refused_by_name() {
    let cases: Vec<(pgbus_runtime::DatabaseBuilder, &str)> = vec![
        (
            Database::builder("postgres://127.0.0.1:1/db").pool_size(0),
            "pool_size",
        ),
        (
            Database::builder("postgres://127.0.0.1:1/db")
                .keepalives_idle(Duration::from_millis(10)),
            "keepalives_idle",
        ),
        (
            Database::builder("postgres://127.0.0.1:1/db")
                .transaction_pooler(true)
                .statement_timeout(Duration::from_secs(1)),
            "statement_timeout",
        ),
        (
            Database::builder("postgres://127.0.0.1:1/db")
                .transaction_pooler(true)
                .read_only(true),
            "read_only",
        ),
    ];
    for (builder, expected) in cases {
        match builder.connect().await {
            Err(Error::InvalidSetting { setting, .. }) => assert_eq!(setting, expected),
            other => panic!("{expected}: {other:?}"),
        }
    }
}
