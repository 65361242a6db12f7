//! A run's result (issue 20) on a real server: `Client::result` returns the
//! typed output of a finished run and the typed errors of the others, is
//! woken by the run-end notification (every path that ends a run sends one),
//! falls back to polling when a notification is missed or its `LISTEN`
//! connection is killed, holds one connection for many waits and closes it
//! with the last, and does not poll in a hot loop.

mod count;
mod notify;
mod wait;

use std::time::Duration;

use futures_util::StreamExt as _;
use pgbus_runtime::prelude::*;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::pg::{TestDb, database_url, eventually};

/// What `Ship` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Receipt {
    order: u32,
    parcels: u32,
}

/// Two steps; the last writes the receipt.
struct Ship;

#[workflow(name = "result.ship", input = u32, output = Receipt)]
impl Ship {
    #[step]
    async fn pack(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&"packed")?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn send(&self, cx: &mut StepCx<u32>) -> StepResult {
        let order = *cx.input();
        cx.output(&Receipt { order, parcels: 2 })?;
        Ok(Flow::Complete)
    }
}

/// Waits for `go`, then writes `"gone"`.
struct Gate;

#[workflow(name = "result.gate", output = String)]
impl Gate {
    #[step(wait_for = "go")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&"gone")?;
        Ok(Flow::Complete)
    }
}

/// How long a test waits for something that must happen soon: generous, so
/// a slow machine does not fail it; never an assertion about speed.
const BOUND: Duration = Duration::from_secs(30);

/// A poll interval no test outlives: a wait that ends within [`BOUND`] was
/// woken by a notification (or its session coming back), not by a poll.
const NEVER: Duration = Duration::from_hours(1);

/// The statement a client's `LISTEN` session last ran.
fn listen_sql(t: &TestDb) -> String {
    format!("LISTEN \"ended_{}\"", t.schema())
}

/// The backends listening on this schema's run-end channel, by pid.
async fn listeners(t: &TestDb) -> Vec<i32> {
    t.query(
        "SELECT pid FROM pg_stat_activity WHERE query = $1 ORDER BY pid",
        &[&listen_sql(t)],
    )
    .await
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// Waits until exactly `n` backends listen on the run-end channel; whether
/// they did within [`BOUND`].
async fn listening(t: &TestDb, n: usize) -> bool {
    eventually(BOUND, || async { listeners(t).await.len() == n }).await
}

/// A worker of `Ship` and `Gate` that polls, run until nothing is due.
async fn run_due(t: &TestDb) -> usize {
    t.db.worker()
        .notifications(false)
        .register(Ship)
        .register(Gate)
        .build()
        .expect("a worker")
        .run_until_idle()
        .await
        .expect("the worker runs")
}

/// A raw `LISTEN` on the schema's run-end channel: the run ids the trigger
/// sends, in commit order.
struct Ends {
    ids: mpsc::UnboundedReceiver<i64>,
    _client: tokio_postgres::Client,
}

impl Ends {
    async fn listen(t: &TestDb) -> Self {
        let config = pgbus_testkit::raw_config(&database_url()).expect("a test URL");
        let (client, mut connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("a connection");
        let (send, ids) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(n) = message {
                    let _ = send.send(n.payload().parse().expect("a run id"));
                }
            }
        });
        // Unquoted, unlike the client's: `listeners` counts the client's alone.
        client
            .batch_execute(&format!("LISTEN ended_{}", t.schema()))
            .await
            .expect("LISTEN");
        Self {
            ids,
            _client: client,
        }
    }

    /// The next run id notified, within [`BOUND`].
    async fn next(&mut self) -> i64 {
        tokio::time::timeout(BOUND, self.ids.recv())
            .await
            .expect("a notification in time")
            .expect("the listener lives")
    }
}
