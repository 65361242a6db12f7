//! Waiting for a run's result: [`Client::result`].

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, instrument};

use super::Client;
use crate::context::RunId;
use crate::engine::{OnPause, result_timed_out, settle_result_as};
use crate::error::Error;
use crate::workflow::Workflow;

/// How often a wait for a result reads its run while no notification
/// session listens (none can, behind a transaction-mode pooler or on a pool
/// handed in alone, or it is reconnecting): 1 s, the worker's default poll
/// interval.
pub const RESULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How often a wait for a result reads its run while the client's
/// notification session listens: 30 s, a safety net for a notification that
/// never came (a run ended by a session that bypasses triggers, say).
pub const RESULT_POLL_INTERVAL_LISTENING: Duration = Duration::from_secs(30);

/// A wait for a run's result, from [`Client::result`]: set a timeout and the
/// rest, then `.await` it. Owns a clone of the client, so it may be spawned.
///
/// ```no_run
/// # use pgbus_runtime::prelude::*;
/// # #[derive(Serialize, Deserialize)] struct Receipt { id: i64 }
/// # struct Fulfil;
/// # #[workflow(output = Receipt)]
/// # impl Fulfil { #[step] async fn ship(&self, cx: &mut StepCx<()>) -> StepResult {
/// #     cx.output(&Receipt { id: 1 })?; Ok(Flow::Complete) } }
/// # async fn demo(client: pgbus_runtime::Client) -> Result<(), pgbus_runtime::Error> {
/// use std::time::Duration;
/// let run = client.start::<Fulfil>(&()).await?;
/// let receipt: Receipt = client
///     .result::<Fulfil>(run)
///     .timeout(Duration::from_secs(30))
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a wait does nothing until it is awaited"]
pub struct ResultWait<W: Workflow> {
    client: Client,
    run_id: RunId,
    timeout: Option<Duration>,
    on_pause: OnPause,
    poll_interval: Option<Duration>,
    workflow: PhantomData<fn() -> W>,
}

impl<W: Workflow> std::fmt::Debug for ResultWait<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultWait")
            .field("workflow", &W::DEFINITION.name)
            .field("run_id", &self.run_id)
            .field("timeout", &self.timeout)
            .field("on_pause", &self.on_pause)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl<W: Workflow> ResultWait<W> {
    /// The longest the wait lasts, in real time (the caller's, not the
    /// store's clock): past it, a run not ended is
    /// [`Error::ResultTimeout`] (a paused one, with [`OnPause::Wait`],
    /// [`Error::RunPaused`]). Default: none, the wait lasts until the run
    /// ends. `Duration::ZERO` reads the run once and does not wait.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What the wait does with a paused run: return [`Error::RunPaused`] at
    /// once ([`OnPause::Return`], the default), or wait on until it is
    /// resumed and ends, or the timeout comes ([`OnPause::Wait`]).
    pub const fn on_pause(mut self, on_pause: OnPause) -> Self {
        self.on_pause = on_pause;
        self
    }

    /// How often the run is read when no notification wakes the wait,
    /// whether a notification session listens or not (default
    /// [`RESULT_POLL_INTERVAL`] without one, [`RESULT_POLL_INTERVAL_LISTENING`]
    /// with one). At least 10 ms.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval.max(Duration::from_millis(10)));
        self
    }
}

impl<W: Workflow> IntoFuture for ResultWait<W> {
    type Output = Result<W::Output, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.wait())
    }
}

impl<W: Workflow> ResultWait<W> {
    #[instrument(
        target = "pgbus_runtime::client",
        skip_all,
        fields(pgbus.workflow = W::DEFINITION.name, pgbus.run_id = %self.run_id),
        err(level = "debug")
    )]
    async fn wait(self) -> Result<W::Output, Error> {
        let store = &self.client.store;
        let listener = &self.client.results;
        // Registered before the first read: a run that ends between that
        // read and the wait below leaves a permit, not a lost wake-up.
        let watch = listener.watch(self.run_id);
        let started = Instant::now();
        loop {
            let view = store.run_result(self.run_id).await?;
            if let Some(done) = settle_result_as::<W::Output>(&view, self.on_pause) {
                return done;
            }
            let waited = started.elapsed();
            if let Some(timeout) = self.timeout
                && waited >= timeout
            {
                return Err(result_timed_out(&view, timeout));
            }
            let mut pause = self.poll_interval.unwrap_or(if listener.listening() {
                RESULT_POLL_INTERVAL_LISTENING
            } else {
                RESULT_POLL_INTERVAL
            });
            if let Some(timeout) = self.timeout {
                pause = pause.min(timeout.saturating_sub(waited));
            }
            tokio::select! {
                () = watch.wake.notified() => {}
                () = tokio::time::sleep(pause) => {
                    debug!(
                        target: "pgbus_runtime::client",
                        { pgbus.run_id = %self.run_id, listening = listener.listening() },
                        "no word of the run; reading it again"
                    );
                }
            }
        }
    }
}

impl Client {
    /// Waits for run `run` of `W` to end and returns its result: the
    /// output (`cx.output(..)`) of the attempt that finished it, the last
    /// step's or one that returned `Flow::Finish`, decoded as `W::Output`
    /// (`#[workflow(output = R)]`). An attempt that recorded no output (a
    /// skipped step, one that never called `cx.output`) gives JSON `null`,
    /// which is `()` and `Option`'s `None`. As DBOS's `get_result`,
    /// Temporal's workflow handle `result` and Absurd's `awaitTaskResult`.
    ///
    /// Returns a [`ResultWait`]; set its [`timeout`](ResultWait::timeout)
    /// and [`on_pause`](ResultWait::on_pause), then `.await` it. The wait is
    /// woken by the run's end: each client (and its clones) holds one
    /// `LISTEN` connection (outside the pool) while any of its waits is
    /// pending, on the schema's run-end channel, and closes it with the last
    /// wait. Without one (a pool handed in alone, or a transaction-mode
    /// pooler), and while it reconnects, the wait reads the run every
    /// second; with one, every 30 s in case a notification was lost. Each
    /// read is one indexed statement on a pooled connection. Dropping the
    /// wait's future ends it cleanly at any point (cancel-safe).
    ///
    /// `run` takes a [`RunId`] or the [`Started`](super::Started) of a start.
    /// The workflow is not checked against the run's: `W` says how to
    /// decode.
    ///
    /// # Errors
    /// - [`Error::RunNotFound`]: no such run (never started, or deleted by
    ///   retention after it ended).
    /// - [`Error::RunCancelled`]: it was cancelled, with the reason.
    /// - [`Error::RunPaused`]: it is paused (at once, by default).
    /// - [`Error::ResultTimeout`]: the timeout came first.
    /// - [`Error::ResultDecode`]: the value is not a `W::Output`.
    /// - database and connection errors of a read: the wait ends (no read is
    ///   retried inside it); [`Error::is_transient`] says whether waiting
    ///   again may succeed.
    pub fn result<W: Workflow>(&self, run: impl Into<RunId>) -> ResultWait<W> {
        ResultWait {
            client: self.clone(),
            run_id: run.into(),
            timeout: None,
            on_pause: OnPause::Return,
            poll_interval: None,
            workflow: PhantomData,
        }
    }
}
