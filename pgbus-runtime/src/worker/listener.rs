//! The worker's `LISTEN` connection: wake-ups for due steps, polling while it is down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt as _;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tracing::{debug, info, warn};

use super::upkeep::Failures;
use super::{WORKER_TARGET, Worker};
use crate::connection::Connector;
use crate::error::{Error, display_chain};

impl Worker {
    /// Starts the `LISTEN` task, when notifications are on and there is
    /// somewhere to listen; without (a pool handed in alone, or behind a
    /// pooler without [`WorkerBuilder::listen_url`](super::WorkerBuilder::listen_url)) says once, at `info`,
    /// that the worker polls.
    pub(super) fn spawn_listener(
        &self,
        wake: &Arc<Notify>,
        stop: &Arc<AtomicBool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let inner = &self.inner;
        if !inner.notifications {
            return None;
        }
        let Some(connector) = inner.listen.clone() else {
            info!(
                target: WORKER_TARGET,
                {
                    pgbus.worker = %inner.id,
                    pgbus.poll_interval = ?inner.poll_interval,
                },
                "no LISTEN connection (a pool handed in alone, or a transaction pooler \
                 without WorkerBuilder::listen_url): polling for work"
            );
            return None;
        };
        Some(tokio::spawn(listen(
            connector,
            inner.store.schema.channel(),
            Arc::clone(wake),
            Arc::clone(stop),
        )))
    }
}

/// Holds a `LISTEN` connection and turns notifications into wake-ups. Reconnects
/// with backoff; while it is down the worker still polls. An outage is logged
/// once when it begins (`warn`) and once when the session is back (`info`).
async fn listen(
    connector: Arc<Connector>,
    channel: String,
    wake: Arc<Notify>,
    stop: Arc<AtomicBool>,
) {
    let mut failures = Failures::default();
    // Whether the session is known to be gone (logged already).
    let mut down = false;
    while !stop.load(Ordering::Relaxed) {
        let ended = listen_once(&connector, &channel, &wake, &mut down).await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if down {
            if let Err(error) = &ended {
                debug!(target: WORKER_TARGET, { error = %display_chain(error) }, "notification connection still failing");
            }
        } else {
            // It was listening (or never tried): the outage begins now, and the
            // first reconnect comes quickly.
            down = true;
            failures = Failures::default();
            match &ended {
                Ok(()) => {
                    warn!(target: WORKER_TARGET, "notification connection closed; polling until it is back");
                }
                Err(error) => warn!(
                    target: WORKER_TARGET,
                    {
                        error = %display_chain(error),
                    },
                    "notification connection lost; polling until it is back"
                ),
            }
        }
        failures.record();
        tokio::time::sleep(failures.pause()).await;
    }
}

/// One `LISTEN` session: connects, listens, wakes the worker on each
/// notification, and returns when the connection ends: `Ok` when the server
/// closed it cleanly, else why it failed. Clears `down` (and says the session is
/// back) once `LISTEN` took.
async fn listen_once(
    connector: &Connector,
    channel: &str,
    wake: &Arc<Notify>,
    down: &mut bool,
) -> Result<(), Error> {
    let (client, mut connection) = connector.connect().await?;
    let notify = Arc::clone(wake);
    // The connection has to be driven for anything, LISTEN included, to happen;
    // the driver ends with the connection and says why it ended.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => notify.notify_one(),
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    if let Err(error) = client.batch_execute(&format!("LISTEN \"{channel}\"")).await {
        driver.abort();
        return Err(error.into());
    }
    if std::mem::take(down) {
        info!(target: WORKER_TARGET, "notification connection is back");
    }
    debug!(target: WORKER_TARGET, { channel }, "listening for wake-ups");
    // Something may have become due while nobody listened.
    wake.notify_one();
    // `client` lives until the connection ends: dropping it would close the
    // session.
    let ended = driver.await;
    drop(client);
    match ended {
        Ok(Ok(())) | Err(_) => Ok(()),
        Ok(Err(error)) => Err(error.into()),
    }
}
