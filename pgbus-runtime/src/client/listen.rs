//! One `LISTEN` session per client for the waits on run results
//! ([`Client::result`](super::Client::result)): held while at least one wait
//! is pending, closed with the last, and fanned out to the waits by run id.
//!
//! Every run that ends (or pauses) is notified on the schema's run-end
//! channel (see [`Schema::result_channel`](crate::Schema::result_channel)),
//! its id as the payload. The session wakes the waits for that id; when it
//! comes up (the first time, or back after a failure) and when it goes down,
//! it wakes every wait, so each reads its run again: a run that ended while
//! nobody listened is seen then, not at the next poll.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures_util::StreamExt as _;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tracing::{debug, info, warn};

use crate::connection::Connector;
use crate::context::RunId;
use crate::error::{Error, display_chain};
use crate::worker::Failures;

/// The log target of the client's records.
const CLIENT_TARGET: &str = "pgbus_runtime::client";

/// The waits of one client (and its clones) and the session that wakes
/// them.
#[derive(Debug)]
pub(crate) struct ResultListener {
    /// How to open the session; `None`: no session, the waits poll (a pool
    /// handed in alone, or a transaction-mode pooler).
    connector: Option<Arc<Connector>>,
    /// The run-end channel.
    channel: String,
    state: Mutex<Waits>,
    /// Whether `LISTEN` is in force now.
    listening: AtomicBool,
}

/// The pending waits, by run id, and the session's task while any is.
#[derive(Debug, Default)]
struct Waits {
    by_run: HashMap<i64, Vec<(u64, Arc<Notify>)>>,
    count: usize,
    next_id: u64,
    session: Option<tokio::task::JoinHandle<()>>,
}

/// A wait's registration: woken (a permit stored if it is not waiting at
/// that moment) when its run is notified or the session comes or goes.
/// Dropping it deregisters the wait, and ends the session with the last one.
#[derive(Debug)]
pub(crate) struct Watch {
    listener: Arc<ResultListener>,
    run: i64,
    id: u64,
    pub(crate) wake: Arc<Notify>,
}

impl ResultListener {
    pub(crate) fn new(connector: Option<Arc<Connector>>, channel: String) -> Self {
        Self {
            connector,
            channel,
            state: Mutex::new(Waits::default()),
            listening: AtomicBool::new(false),
        }
    }

    /// Whether `LISTEN` is in force now.
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    /// Registers a wait for `run`, starting the session if it is the first.
    /// Needs a Tokio runtime (the session is a task of it).
    pub(crate) fn watch(self: &Arc<Self>, run: RunId) -> Watch {
        let wake = Arc::new(Notify::new());
        let mut waits = self.waits();
        let id = waits.next_id;
        waits.next_id = waits.next_id.wrapping_add(1);
        waits
            .by_run
            .entry(run.0)
            .or_default()
            .push((id, Arc::clone(&wake)));
        waits.count += 1;
        if waits.session.is_none()
            && let Some(connector) = &self.connector
        {
            waits.session = Some(tokio::spawn(session_loop(
                Arc::downgrade(self),
                Arc::clone(connector),
                self.channel.clone(),
            )));
        }
        drop(waits);
        Watch {
            listener: Arc::clone(self),
            run: run.0,
            id,
            wake,
        }
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the waits for the run a notification names; a payload that is
    /// not a run id (nothing of ours sends one) is ignored.
    fn dispatch(&self, payload: &str) {
        let Ok(run) = payload.parse::<i64>() else {
            return;
        };
        if let Some(waits) = self.waits().by_run.get(&run) {
            for (_, wake) in waits {
                wake.notify_one();
            }
        }
    }

    /// Wakes every wait, after the session came up or went down.
    fn wake_all(&self) {
        for (_, wake) in self.waits().by_run.values().flatten() {
            wake.notify_one();
        }
    }

    fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::Release);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut waits = self.listener.waits();
        if let Some(list) = waits.by_run.get_mut(&self.run) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                waits.by_run.remove(&self.run);
            }
        }
        waits.count = waits.count.saturating_sub(1);
        if waits.count == 0
            && let Some(session) = waits.session.take()
        {
            // The last wait is gone: close the session (its connection is
            // dropped with the task's future).
            session.abort();
            self.listener.set_listening(false);
        }
    }
}

/// Holds the session while the listener lives and has waits: reconnects
/// with backoff (100 ms doubling to 5 s), logging an outage once when it
/// begins (`warn`) and once when the session is back (`info`).
async fn session_loop(listener: Weak<ResultListener>, connector: Arc<Connector>, channel: String) {
    let mut failures = Failures::default();
    let mut down = false;
    loop {
        let ended = session(&listener, &connector, &channel, &mut down).await;
        let Some(strong) = listener.upgrade() else {
            return;
        };
        strong.set_listening(false);
        // The waits read their runs again, and poll as without a session.
        strong.wake_all();
        drop(strong);
        if down {
            if let Err(error) = &ended {
                debug!(target: CLIENT_TARGET, { error = %display_chain(error) }, "result notification connection still failing");
            }
        } else {
            down = true;
            failures = Failures::default();
            match &ended {
                Ok(()) => warn!(
                    target: CLIENT_TARGET,
                    "result notification connection closed; waits for results poll until it is back"
                ),
                Err(error) => warn!(
                    target: CLIENT_TARGET,
                    { error = %display_chain(error) },
                    "result notification connection lost; waits for results poll until it is back"
                ),
            }
        }
        failures.record();
        tokio::time::sleep(failures.pause()).await;
    }
}

/// One session: connects, listens, and dispatches notifications until the
/// connection ends (`Ok` when the server closed it cleanly). The connection
/// is driven by this future itself, so dropping it (the session's task
/// aborted) closes the connection.
async fn session(
    listener: &Weak<ResultListener>,
    connector: &Connector,
    channel: &str,
    down: &mut bool,
) -> Result<(), Error> {
    let (client, mut connection) = connector.connect().await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let sql = format!("LISTEN \"{channel}\"");
    let listen = client.batch_execute(&sql);
    tokio::pin!(listen);
    let mut listened = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listened => {
                done?;
                listened = true;
                if std::mem::take(down) {
                    info!(target: CLIENT_TARGET, "result notification connection is back");
                }
                debug!(target: CLIENT_TARGET, { channel }, "listening for run ends");
                let Some(listener) = listener.upgrade() else {
                    return Ok(());
                };
                listener.set_listening(true);
                // A run may have ended while nobody listened.
                listener.wake_all();
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    let Some(listener) = listener.upgrade() else {
                        return Ok(());
                    };
                    listener.dispatch(notification.payload());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
        }
    }
}
