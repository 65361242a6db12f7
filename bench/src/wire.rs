//! What the engine says to Postgres per step, counted on the wire: a TCP
//! proxy on loopback between a worker's pool and the server that counts round
//! trips, statements and commits without touching the engine.
//!
//! - A **round trip** is the client speaking after the server spoke last
//!   (or first): requests the client pipelines before the server answers are
//!   one round trip, as they cost one network wait.
//! - A **statement** is a `CommandComplete` from the server (`BEGIN` and
//!   `COMMIT` included).
//! - A **commit** is a transaction that ended without an error or a
//!   `ROLLBACK`: a `ReadyForQuery` that says idle (`I`) after at least one
//!   `CommandComplete` since the one before (an explicit block's `COMMIT`, or
//!   a statement outside a block).
//!
//! - **Server time** is the time at least one connection waits on the server:
//!   from the client's request (a `Sync` or a simple `Query`, counted from
//!   the client's messages) to the `ReadyForQuery` that answers it, the
//!   intervals of all connections joined. What is left of the span from the
//!   first request to the last answer is **worker time**: no request is
//!   waiting, so the worker (and the proxy's hop) is what the step waits on.
//!   At concurrency 1 the two add up to a step's latency.
//!
//! Counting starts on each connection at its first `ReadyForQuery`: the
//! start-up and authentication exchange of a new connection is not the
//! engine's per-step work. The message format is PostgreSQL's frontend/backend
//! protocol 3.0 (PostgreSQL documentation, "Message Formats"). The proxied
//! URL asks for no TLS, so the bytes can be read.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::BoxError;

/// The counts so far, all connections together.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    statements: AtomicU64,
    commits: AtomicU64,
    busy: Mutex<Busy>,
}

/// The joined intervals in which some connection waits on the server.
#[derive(Debug, Default)]
struct Busy {
    /// Connections with a request not yet answered.
    waiting: usize,
    /// When `waiting` last went from 0 to 1.
    since: Option<Instant>,
    /// The intervals closed so far, added up.
    total: Duration,
    /// When `waiting` last went back to 0.
    last_end: Option<Instant>,
    /// The first request since the last [`WireProxy::mark`].
    first: Option<Instant>,
}

impl Counters {
    fn busy(&self) -> std::sync::MutexGuard<'_, Busy> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A connection sent a request while it had none waiting.
    fn begin(&self) {
        let mut busy = self.busy();
        if busy.waiting == 0 {
            let now = Instant::now();
            busy.since = Some(now);
            busy.first.get_or_insert(now);
        }
        busy.waiting += 1;
    }

    /// A connection's last waiting request was answered.
    fn end(&self) {
        let mut busy = self.busy();
        busy.waiting = busy.waiting.saturating_sub(1);
        if busy.waiting == 0
            && let Some(since) = busy.since.take()
        {
            let now = Instant::now();
            busy.total += now - since;
            busy.last_end = Some(now);
        }
    }
}

/// A snapshot of the counts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WireCounts {
    /// Client turns (see the module's docs).
    pub(crate) round_trips: u64,
    /// `CommandComplete` messages.
    pub(crate) statements: u64,
    /// Transactions that committed.
    pub(crate) commits: u64,
    /// Server time (see the module's docs) in closed intervals.
    pub(crate) server: Duration,
    /// The first request since the proxy's last [`WireProxy::mark`].
    pub(crate) first_request: Option<Instant>,
    /// When the last interval of server time closed.
    pub(crate) last_answer: Option<Instant>,
}

impl WireCounts {
    /// What was counted between `earlier` and `self`.
    pub(crate) const fn since(self, earlier: Self) -> Self {
        Self {
            round_trips: self.round_trips.saturating_sub(earlier.round_trips),
            statements: self.statements.saturating_sub(earlier.statements),
            commits: self.commits.saturating_sub(earlier.commits),
            server: self.server.saturating_sub(earlier.server),
            first_request: self.first_request,
            last_answer: self.last_answer,
        }
    }

    /// From the first request to the last answer, zero before either.
    pub(crate) fn span(&self) -> Duration {
        match (self.first_request, self.last_answer) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        }
    }
}

/// The counting proxy: accepts on an ephemeral loopback port and forwards
/// each connection to `upstream`. Stops accepting when dropped; connections
/// already made end when either side closes.
pub(crate) struct WireProxy {
    local: SocketAddr,
    counters: Arc<Counters>,
    accept: JoinHandle<()>,
}

impl WireProxy {
    /// Starts the proxy in front of `upstream`.
    ///
    /// # Errors
    /// When the loopback listener cannot be bound.
    pub(crate) async fn start(upstream: SocketAddr) -> Result<Self, BoxError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let local = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let shared = Arc::clone(&counters);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counters = Arc::clone(&shared);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        forward(client, server, counters).await;
                    }
                });
            }
        });
        Ok(Self {
            local,
            counters,
            accept,
        })
    }

    /// The port clients connect to, on 127.0.0.1.
    pub(crate) const fn port(&self) -> u16 {
        self.local.port()
    }

    /// Starts the span of [`WireCounts::span`] again at the next request.
    pub(crate) fn mark(&self) {
        self.counters.busy().first = None;
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> WireCounts {
        let (server, first_request, last_answer) = {
            let busy = self.counters.busy();
            (busy.total, busy.first, busy.last_end)
        };
        WireCounts {
            server,
            first_request,
            last_answer,
            round_trips: self.counters.round_trips.load(Ordering::Relaxed),
            statements: self.counters.statements.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
        }
    }
}

impl Drop for WireProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One connection's state shared by its two directions.
#[derive(Debug, Default)]
struct Turn {
    /// The server sent the last bytes (or nothing was sent yet).
    server_last: AtomicBool,
    /// The connection reached its first `ReadyForQuery`.
    ready: AtomicBool,
    /// Requests sent and not yet answered by a `ReadyForQuery`.
    waiting: AtomicU64,
}

/// Pumps both directions until either closes.
async fn forward(client: TcpStream, server: TcpStream, counters: Arc<Counters>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let turn = Arc::new(Turn {
        server_last: AtomicBool::new(true),
        ready: AtomicBool::new(false),
        waiting: AtomicU64::new(0),
    });
    let up = tokio::spawn(client_to_server(
        client_read,
        server_write,
        Arc::clone(&turn),
        Arc::clone(&counters),
    ));
    server_to_client(server_read, client_write, &turn, &counters).await;
    up.abort();
}

/// Client bytes to the server, counting a round trip at each client turn.
async fn client_to_server(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    turn: Arc<Turn>,
    counters: Arc<Counters>,
) {
    let mut buf = vec![0_u8; 64 * 1024];
    let mut requests = Requests::default();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Counted before the bytes go on, so the answer cannot come first.
        let asked = requests.feed(&buf[..n]);
        if asked > 0 && turn.waiting.fetch_add(asked, Ordering::AcqRel) == 0 {
            counters.begin();
        }
        if turn.server_last.swap(false, Ordering::AcqRel) && turn.ready.load(Ordering::Acquire) {
            counters.round_trips.fetch_add(1, Ordering::Relaxed);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Server bytes to the client, read as messages for statements and commits.
async fn server_to_client(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    turn: &Turn,
    counters: &Counters,
) {
    let mut buf = vec![0_u8; 64 * 1024];
    let mut messages = Messages::default();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        turn.server_last.store(true, Ordering::Release);
        messages.feed(&buf[..n], turn, counters);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The client's messages, split from the byte stream: first the start-up
/// packet (a 32-bit length that counts itself, no type byte), then typed
/// messages as the server's. Counts the requests a `ReadyForQuery` answers:
/// `Sync` (`S`) and simple `Query` (`Q`).
#[derive(Debug, Default)]
struct Requests {
    pending: Vec<u8>,
    started: bool,
}

impl Requests {
    /// Requests completed in `bytes` (with what came before).
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.pending.extend_from_slice(bytes);
        let mut asked = 0;
        let mut at = 0;
        loop {
            let typed = usize::from(self.started);
            if self.pending.len() - at < typed + 4 {
                break;
            }
            let l = at + typed;
            let len = u32::from_be_bytes([
                self.pending[l],
                self.pending[l + 1],
                self.pending[l + 2],
                self.pending[l + 3],
            ]) as usize;
            let end = l + len;
            if len < 4 || self.pending.len() < end {
                break;
            }
            if self.started && matches!(self.pending[at], b'S' | b'Q') {
                asked += 1;
            }
            self.started = true;
            at = end;
        }
        self.pending.drain(..at);
        asked
    }
}

/// The server's messages, split from the byte stream: a type byte, then a
/// 32-bit big-endian length that counts itself and the body.
#[derive(Debug, Default)]
struct Messages {
    pending: Vec<u8>,
    /// `CommandComplete`s since the last `ReadyForQuery`, and the last tag.
    completed: u64,
    last_rollback: bool,
}

impl Messages {
    fn feed(&mut self, bytes: &[u8], turn: &Turn, counters: &Counters) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while self.pending.len() - at >= 5 {
            let kind = self.pending[at];
            let len = u32::from_be_bytes([
                self.pending[at + 1],
                self.pending[at + 2],
                self.pending[at + 3],
                self.pending[at + 4],
            ]) as usize;
            let end = at + 1 + len;
            if len < 4 || self.pending.len() < end {
                break;
            }
            let body = &self.pending[at + 5..end];
            match kind {
                b'C' => {
                    let tag = body.split(|b| *b == 0).next().unwrap_or_default();
                    self.completed += 1;
                    self.last_rollback = tag.starts_with(b"ROLLBACK");
                    if turn.ready.load(Ordering::Acquire) {
                        counters.statements.fetch_add(1, Ordering::Relaxed);
                    }
                }
                b'Z' => {
                    let idle = body.first() == Some(&b'I');
                    let answered = turn.ready.swap(true, Ordering::AcqRel);
                    if answered
                        && turn
                            .waiting
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                            == Ok(1)
                    {
                        counters.end();
                    }
                    if answered && idle && self.completed > 0 && !self.last_rollback {
                        counters.commits.fetch_add(1, Ordering::Relaxed);
                    }
                    if idle {
                        self.completed = 0;
                        self.last_rollback = false;
                    }
                }
                _ => {}
            }
            at = end;
        }
        self.pending.drain(..at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&(u32::try_from(body.len()).unwrap() + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn counted(stream: &[u8], chunk: usize) -> WireCounts {
        let turn = Turn::default();
        let counters = Counters::default();
        let mut messages = Messages::default();
        for part in stream.chunks(chunk) {
            messages.feed(part, &turn, &counters);
        }
        WireCounts {
            round_trips: 0,
            statements: counters.statements.load(Ordering::Relaxed),
            commits: counters.commits.load(Ordering::Relaxed),
            ..WireCounts::default()
        }
    }

    #[test]
    fn requests_are_syncs_and_simple_queries_after_the_start_up_packet() {
        // A start-up packet (length, protocol 3.0, one parameter), then a
        // password message, a pipeline of Parse, Bind, Execute and Sync, a
        // Flush, and a simple Query.
        let mut params = 196_608_u32.to_be_bytes().to_vec();
        params.extend_from_slice(b"user\0u\0\0");
        let mut stream = (u32::try_from(params.len()).unwrap() + 4)
            .to_be_bytes()
            .to_vec();
        stream.extend(params);
        stream.extend(message(b'p', b"secret\0"));
        stream.extend(message(b'P', b"\0SELECT 1\0\0\0"));
        stream.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
        stream.extend(message(b'E', b"\0\0\0\0\0"));
        stream.extend(message(b'S', b""));
        stream.extend(message(b'H', b""));
        stream.extend(message(b'Q', b"COMMIT\0"));
        for chunk in [1, 2, 5, stream.len()] {
            let mut requests = Requests::default();
            let asked: u64 = stream.chunks(chunk).map(|part| requests.feed(part)).sum();
            assert_eq!(asked, 2, "chunk {chunk}");
        }
    }

    #[test]
    fn a_block_is_one_commit_and_each_statement_counts_whatever_the_reads() {
        let mut stream = message(b'R', &[0, 0, 0, 0]);
        stream.extend(message(b'Z', b"I"));
        // BEGIN; UPDATE; COMMIT, each with its own Sync.
        stream.extend(message(b'C', b"BEGIN\0"));
        stream.extend(message(b'Z', b"T"));
        stream.extend(message(b'C', b"UPDATE 1\0"));
        stream.extend(message(b'Z', b"T"));
        stream.extend(message(b'C', b"COMMIT\0"));
        stream.extend(message(b'Z', b"I"));
        // A statement outside a block, then one that failed, then a rollback.
        stream.extend(message(b'C', b"SELECT 3\0"));
        stream.extend(message(b'Z', b"I"));
        stream.extend(message(b'E', b"SERROR\0\0"));
        stream.extend(message(b'Z', b"I"));
        stream.extend(message(b'C', b"BEGIN\0"));
        stream.extend(message(b'Z', b"T"));
        stream.extend(message(b'C', b"ROLLBACK\0"));
        stream.extend(message(b'Z', b"I"));
        for chunk in [1, 3, 7, stream.len()] {
            let counts = counted(&stream, chunk);
            assert_eq!((counts.statements, counts.commits), (6, 2), "chunk {chunk}");
        }
    }

    #[test]
    fn nothing_counts_before_the_first_ready_for_query() {
        let mut stream = message(b'C', b"SELECT 1\0");
        stream.extend(message(b'Z', b"I"));
        let counts = counted(&stream, stream.len());
        assert_eq!((counts.statements, counts.commits), (0, 0));
    }

    /// Through the proxy to the local server: a simple-query batch is one
    /// round trip, three statements and one commit; a prepared query is two
    /// round trips (prepare, then bind and execute), one statement and one
    /// commit.
    #[tokio::test]
    async fn counts_a_real_session() {
        use std::net::ToSocketAddrs;
        let config = pgbus_testkit::raw_config(&pgbus_testkit::test_database_url()).unwrap();
        let tokio_postgres::config::Host::Tcp(host) = &config.get_hosts()[0] else {
            eprintln!("SKIPPED: the test database is not on TCP");
            return;
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream = (host.as_str(), port)
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        let proxy = WireProxy::start(upstream).await.unwrap();
        let user = config.get_user().unwrap_or("postgres");
        let dbname = config.get_dbname().unwrap_or(user);
        let url = format!(
            "postgres://{user}@127.0.0.1:{}/{dbname}?sslmode=disable",
            proxy.port()
        );
        let client = crate::schema::connect(&url).await.unwrap();
        let before = proxy.counts();
        client
            .batch_execute("BEGIN; SELECT 1; COMMIT")
            .await
            .unwrap();
        let batch = proxy.counts().since(before);
        assert_eq!(
            (batch.round_trips, batch.statements, batch.commits),
            (1, 3, 1)
        );
        let before = proxy.counts();
        client.query("SELECT 1", &[]).await.unwrap();
        let query = proxy.counts().since(before);
        assert_eq!(
            (query.round_trips, query.statements, query.commits),
            (2, 1, 1)
        );
        // Each request was waited on, and the waits fit in the span.
        let all = proxy.counts();
        assert!(all.server > Duration::ZERO, "{all:?}");
        assert!(all.span() >= all.server, "{all:?}");
    }
}
