//! A run's result, as `Client::result` returns it, on the virtual clock.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use pgbus_runtime::engine::{OnPause, result_timed_out, settle_result_as};
use pgbus_runtime::{Error, ResultView, RunId, RunRead, Workflow};

use super::{MAX_ATTEMPTS_PER_CALL, TestEnv};

/// A wait for a run's result in a [`TestEnv`], from [`TestEnv::result`]:
/// `.await` it to drive the environment until the run ends, or read the
/// result as it stands with [`TestResult::now`]. The same errors as
/// `Client::result`'s `ResultWait`, with a timeout on the virtual clock.
#[must_use = "a wait does nothing until it is awaited or read with `now`"]
pub struct TestResult<'a, W: Workflow> {
    env: &'a TestEnv,
    run_id: RunId,
    timeout: Option<Duration>,
    on_pause: OnPause,
    workflow: PhantomData<fn() -> W>,
}

impl<W: Workflow> std::fmt::Debug for TestResult<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestResult")
            .field("workflow", &W::DEFINITION.name)
            .field("run_id", &self.run_id)
            .field("timeout", &self.timeout)
            .field("on_pause", &self.on_pause)
            .finish_non_exhaustive()
    }
}

impl<W: Workflow> TestResult<'_, W> {
    /// The longest the wait lasts on the virtual clock: the environment runs
    /// what is due, and moves the clock to each next due time, only up to
    /// then. Default: none.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What the wait does with a paused run, as `ResultWait::on_pause`:
    /// return `Error::RunPaused` at once (the default), or wait on
    /// ([`OnPause::Wait`]); nothing in the environment resumes a run by
    /// itself, so with nothing else to run the wait then ends with
    /// `Error::RunPaused`, at the timeout if one was given.
    pub const fn on_pause(mut self, on_pause: OnPause) -> Self {
        self.on_pause = on_pause;
        self
    }

    /// The result as the run stands, running nothing and moving no clock:
    /// its value if it finished, the errors of a cancelled or paused run,
    /// and `Error::ResultTimeout` (waited zero) if it has not ended; as
    /// `Client::result(..).timeout(Duration::ZERO)`.
    ///
    /// # Errors
    /// As [`TestEnv::result`].
    pub fn now(self) -> Result<W::Output, Error> {
        let view = self.read()?;
        settle_result_as::<W::Output>(&view, self.on_pause)
            .unwrap_or_else(|| Err(result_timed_out(&view, Duration::ZERO)))
    }

    fn read(&self) -> Result<ResultView, Error> {
        self.env.store().rows().run_result(self.run_id)
    }

    /// Runs due steps, one attempt at a time, and jumps the clock to the
    /// next due time (or deadline) when none is due, until the run ends, the
    /// timeout passes, or nothing is left to run.
    async fn drive(self) -> Result<W::Output, Error> {
        let env = self.env;
        let started = env.now();
        let deadline = self.timeout.and_then(|timeout| {
            chrono::Duration::from_std(timeout)
                .ok()
                .and_then(|t| started.checked_add_signed(t))
        });
        let mut attempts = 0;
        loop {
            let view = self.read()?;
            if let Some(done) = settle_result_as::<W::Output>(&view, self.on_pause) {
                return done;
            }
            let waited =
                |now: chrono::DateTime<chrono::Utc>| (now - started).to_std().unwrap_or_default();
            if attempts < MAX_ATTEMPTS_PER_CALL && env.run_next().await.is_some() {
                attempts += 1;
                continue;
            }
            if env.expire_deadlines() > 0 {
                continue;
            }
            let mut rows = env.store().rows();
            let next = rows
                .next_due(env.runner.registered())
                .filter(|due| *due > rows.now)
                .into_iter()
                .chain(rows.next_deadline())
                .min();
            match (next, deadline) {
                (Some(due), deadline) if attempts < MAX_ATTEMPTS_PER_CALL => {
                    if let Some(deadline) = deadline.filter(|deadline| due > *deadline) {
                        rows.now = rows.now.max(deadline);
                        let waited = waited(rows.now);
                        drop(rows);
                        // One last look: nothing ran, but say how it stands.
                        return Err(result_timed_out(&self.read()?, waited));
                    }
                    rows.now = due;
                }
                _ => {
                    if let Some(deadline) = deadline {
                        rows.now = rows.now.max(deadline);
                    }
                    let waited = waited(rows.now);
                    drop(rows);
                    let read = RunRead::latest(1).lost_worker_threshold(env.lost_worker_threshold);
                    if let Some(unrunnable) = env.run_with(self.run_id, read)?.unrunnable {
                        return Err(Error::RunUnrunnable {
                            run_id: self.run_id,
                            unrunnable: Box::new(unrunnable),
                        });
                    }
                    return Err(result_timed_out(&view, waited));
                }
            }
        }
    }
}

impl<'a, W: Workflow> IntoFuture for TestResult<'a, W> {
    type Output = Result<W::Output, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.drive())
    }
}

impl TestEnv {
    /// Run `run` of `W`'s result, as `Client::result` waits for it, on the
    /// virtual clock: `.await` it to run due steps (every run's, as
    /// [`TestEnv::run_to_completion`] does) and jump the clock to each next
    /// due time until the run ends; [`TestResult::timeout`] bounds the
    /// virtual time it may take, and [`TestResult::now`] reads the result as
    /// it stands without running anything.
    ///
    /// ```
    /// use pgbus_runtime::prelude::*;
    /// use pgbus_testkit::TestEnv;
    ///
    /// #[derive(Debug, PartialEq, Serialize, Deserialize)]
    /// struct Receipt { parcels: u32 }
    ///
    /// struct Ship;
    /// #[workflow(output = Receipt)]
    /// impl Ship {
    ///     #[step(wait = "2h")]
    ///     async fn ship(&self, cx: &mut StepCx<()>) -> StepResult {
    ///         cx.output(&Receipt { parcels: 2 })?;
    ///         Ok(Flow::Complete)
    ///     }
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let env = TestEnv::new().register(Ship);
    /// let run = env.start::<Ship>(&()).unwrap();
    /// assert!(env.result::<Ship>(run).now().is_err());  // not ended yet
    /// let receipt = env.result::<Ship>(run).timeout(std::time::Duration::from_secs(3 * 3600)).await;
    /// assert_eq!(receipt.unwrap(), Receipt { parcels: 2 });
    /// # });
    /// ```
    ///
    /// # Errors
    /// As `Client::result`: [`Error::RunNotFound`], [`Error::RunCancelled`],
    /// [`Error::RunPaused`], [`Error::ResultDecode`], and
    /// [`Error::ResultTimeout`] when the timeout passes first or, with none,
    /// when nothing is left that could end the run (a step waiting for a
    /// signal nobody sends: the clock does not move then). Also
    /// [`Error::RunUnrunnable`] when the run's due step is one the
    /// environment cannot run (see [`TestEnv::run_to_completion`]). Stops
    /// after 10,000 attempts, as `run_to_completion`.
    pub fn result<W: Workflow>(&self, run: impl Into<RunId>) -> TestResult<'_, W> {
        TestResult {
            env: self,
            run_id: run.into(),
            timeout: None,
            on_pause: OnPause::Return,
            workflow: PhantomData,
        }
    }
}
