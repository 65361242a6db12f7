//! A TCP proxy in front of the test server that reads the frontend protocol
//! (untyped startup packets, then typed messages) and counts each message
//! type the clients send, so a test counts round trips (`Sync`, `Query`) or
//! statements (`Query`, `Execute`) however the bytes were split into TCP
//! packets. Plain connections only ([`WireCounter::url`] is `sslmode=disable`).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::pg::database_url;

/// Counts of the frontend messages sent through it, by type byte.
pub(crate) struct WireCounter {
    port: u16,
    counts: Arc<[AtomicUsize; 256]>,
    closed: Arc<AtomicBool>,
}

impl WireCounter {
    /// Listens on a free loopback port; relays each connection to the test
    /// server on threads of its own until dropped.
    pub(crate) fn start() -> Self {
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
        let counts: Arc<[AtomicUsize; 256]> =
            Arc::new(std::array::from_fn(|_| AtomicUsize::new(0)));
        let closed = Arc::new(AtomicBool::new(false));
        let (counted, stop) = (Arc::clone(&counts), Arc::clone(&closed));
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
                    let _ = relay(client, server, &counted);
                });
            }
        });
        Self {
            port,
            counts,
            closed,
        }
    }

    /// A connection string through the proxy, without TLS (so the proxy can
    /// read the messages).
    pub(crate) fn url(&self) -> String {
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

    /// How many messages of the types `kinds` were sent so far.
    pub(crate) fn count(&self, kinds: &[u8]) -> usize {
        kinds
            .iter()
            .map(|&kind| self.counts[usize::from(kind)].load(Ordering::SeqCst))
            .sum()
    }

    /// Round trips so far: every `Sync` (the end of an extended-protocol
    /// exchange) and every simple `Query`.
    pub(crate) fn trips(&self) -> usize {
        self.count(b"SQ")
    }

    /// Statements run so far: every simple `Query` and every `Execute` (a
    /// `Parse` alone runs nothing).
    pub(crate) fn statements(&self) -> usize {
        self.count(b"QE")
    }
}

impl Drop for WireCounter {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies the client's messages to the server, counting each by its type.
fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    counts: &[AtomicUsize; 256],
) -> std::io::Result<()> {
    // Untyped startup packets: an SSL or GSS encryption request (answered
    // with one byte, then another packet), then the startup message.
    loop {
        let mut len = [0_u8; 4];
        client.read_exact(&mut len)?;
        let mut body = vec![
            0_u8;
            usize::try_from(u32::from_be_bytes(len))
                .unwrap_or(0)
                .saturating_sub(4)
        ];
        client.read_exact(&mut body)?;
        server.write_all(&len)?;
        server.write_all(&body)?;
        let code = body
            .get(..4)
            .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        if code != 80_877_103 && code != 80_877_104 {
            break;
        }
    }
    loop {
        let mut header = [0_u8; 5];
        client.read_exact(&mut header)?;
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let mut body = vec![0_u8; usize::try_from(len).unwrap_or(0).saturating_sub(4)];
        client.read_exact(&mut body)?;
        counts[usize::from(header[0])].fetch_add(1, Ordering::SeqCst);
        server.write_all(&header)?;
        server.write_all(&body)?;
    }
}
