//! How many statements a wait sends: counted on the wire, by a proxy between
//! the client and the server that reads the protocol's frontend messages.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, Error};

use super::{BOUND, Gate, listening};
use crate::pg::{TestDb, database_url};

/// A TCP proxy to the test server that counts the statements its clients
/// send: each simple `Query` and each `Execute` of the extended protocol
/// (a `Parse` alone runs nothing). Plain connections only (`sslmode=disable`).
struct CountingProxy {
    port: u16,
    statements: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
}

impl CountingProxy {
    fn start() -> Self {
        let config: tokio_postgres::Config = database_url().parse().expect("a test URL");
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        let upstream = format!(
            "{host}:{}",
            config.get_ports().first().copied().unwrap_or(5432)
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("an address").port();
        let statements = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let (counted, stop) = (Arc::clone(&statements), Arc::clone(&closed));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(&upstream)) else {
                    continue;
                };
                let (Ok(mut from_server), Ok(mut to_client)) =
                    (server.try_clone(), client.try_clone())
                else {
                    continue;
                };
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_server, &mut to_client);
                    let _ = to_client.shutdown(Shutdown::Both);
                });
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let _ = pump_frontend(client, server, &counted);
                });
            }
        });
        Self {
            port,
            statements,
            closed,
        }
    }

    /// A connection string through the proxy.
    fn url(&self) -> String {
        let config = pgbus_testkit::raw_config(&database_url()).expect("a test URL");
        let mut url = format!(
            "host=127.0.0.1 port={} dbname={} sslmode=disable",
            self.port,
            config.get_dbname().unwrap_or("postgres")
        );
        if let Some(user) = config.get_user() {
            let _ = write!(url, " user={user}");
        }
        if let Some(password) = config.get_password() {
            let _ = write!(url, " password={}", String::from_utf8_lossy(password));
        }
        url
    }

    fn statements(&self) -> usize {
        self.statements.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies the client's messages to the server, counting `Q` and `E`. The
/// first message (and one after an `SSLRequest`, refused by the server
/// under `sslmode=disable`) has no type byte.
fn pump_frontend(
    mut client: TcpStream,
    mut server: TcpStream,
    statements: &AtomicUsize,
) -> std::io::Result<()> {
    let mut startup = true;
    loop {
        let (kind, length) = if startup {
            let mut length = [0; 4];
            client.read_exact(&mut length)?;
            server.write_all(&length)?;
            (None, u32::from_be_bytes(length))
        } else {
            let mut header = [0; 5];
            client.read_exact(&mut header)?;
            server.write_all(&header)?;
            let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
            (Some(header[0]), length)
        };
        let mut body = vec![0; usize::try_from(length).unwrap_or(0).saturating_sub(4)];
        client.read_exact(&mut body)?;
        server.write_all(&body)?;
        match kind {
            // SSLRequest or GSSENCRequest: a startup message follows.
            None if body.get(..4) == Some(&[4, 210, 22, 47])
                || body.get(..4) == Some(&[4, 210, 22, 48]) => {}
            None => startup = false,
            Some(b'Q' | b'E') => {
                statements.fetch_add(1, Ordering::SeqCst);
            }
            Some(_) => {}
        }
    }
}

/// A wait for a run that ends after a while reads the run a bounded number
/// of times, however long it waits and however many other runs end
/// meanwhile: no hot loop, and other runs' notifications wake nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_reads_its_run_a_few_times_not_in_a_loop() -> Result<(), Error> {
    let t = TestDb::new().await;
    let proxy = CountingProxy::start();
    let db =
        Database::connect_with(&proxy.url(), t.db.schema().clone(), t.db.clock().clone()).await?;
    let waiter = db.client();
    let client = t.client();
    let run = client.start::<Gate>(&()).await?.run_id;
    let others: Vec<RunId> = {
        let mut others = Vec::new();
        for _ in 0..20 {
            others.push(client.start::<Gate>(&()).await?.run_id);
        }
        others
    };

    let before = proxy.statements();
    let waiting = tokio::spawn(waiter.result::<Gate>(run).into_future());
    assert!(listening(&t, 1).await, "the waiter listens");
    // A while, with twenty other runs ending on the same channel.
    for other in &others {
        client.cancel(*other, "ops", "not this one").await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let while_waiting = proxy.statements() - before;
    client.cancel(run, "ops", "this one").await?;
    let ended = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken")
        .expect("the wait's task");
    assert!(
        matches!(ended, Err(Error::RunCancelled { .. })),
        "{ended:?}"
    );
    let total = proxy.statements() - before;
    // The first read; one more when the session came up (a run may have
    // ended before it listened); `LISTEN`; the read after the end; and the
    // pool's check of a connection idle for over a second (an empty query).
    assert!(
        while_waiting <= 4,
        "{while_waiting} statements while waiting: a poll in a loop?"
    );
    assert!(total <= 6, "{total} statements in all");
    Ok(())
}
