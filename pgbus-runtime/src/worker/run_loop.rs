//! The worker's loop: claiming due steps and running them, until shut down or idle.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, Level, debug, info, info_span, warn};

use super::upkeep::Failures;
use super::{Inner, WORKER_TARGET, Worker, failure_level};
use crate::error::{Error, display_chain};
use crate::store::{Attempted, Claim, Ended, Observe};

impl Worker {
    /// Runs until `shutdown` completes, then stops claiming and lets running
    /// bodies finish within the grace period.
    ///
    /// Database errors do not end the loop: they are logged once, and the worker
    /// retries with backoff until the database answers again.
    ///
    /// Dropping the future instead (a `select!` that went the other way, an
    /// aborted task) stops everything it started at once: its bodies, its
    /// `LISTEN` session (whose connection closes) and its heartbeats and
    /// sweeps (whose pool of [`UPKEEP_CONNECTIONS`](super::UPKEEP_CONNECTIONS)
    /// closes with the last clone of the worker). Only a clean stop removes
    /// the worker row; after a drop the row stays, no longer heartbeating, so
    /// the sweep takes the attempts it held for lost after the lost-worker
    /// threshold and removes the row later, as for a killed process.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for fatal setup errors.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let inner = &self.inner;
        // Everything the loop logs, its tasks' lines included, names the
        // worker.
        let span = info_span!(target: WORKER_TARGET, "pgbus.worker", pgbus.worker = %inner.id, pgbus.worker_name = %inner.name);
        self.run_loop(shutdown).instrument(span).await
    }

    async fn run_loop(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let inner = &self.inner;
        // Dropped with this future, however it ends: what it spawns goes too.
        let mut spawned = Spawned::enter(&inner.loops);
        info!(target: WORKER_TARGET, { pgbus.worker = %inner.id, pgbus.workflows = ?inner.workflows, pgbus.queues = ?inner.queues, pgbus.concurrency = inner.concurrency }, "worker started");
        if let Err(error) = self.ensure_registered().await {
            // The first claim tries again; claims fail until the row exists.
            warn!(target: WORKER_TARGET, { pgbus.worker = %inner.id, error = %display_chain(&error) }, "could not record the worker row yet");
        }

        let wake = Arc::new(Notify::new());
        let stop_listening = Arc::new(AtomicBool::new(false));
        spawned.listener = self.spawn_listener(&wake, &stop_listening);
        spawned.upkeep = Some(tokio::spawn(self.clone().upkeep().in_current_span()));

        let slots = Arc::new(Semaphore::new(inner.concurrency));
        // Set once shutdown begins: slots stop taking steps eagerly.
        let stopping = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let mut failures = Failures::default();
        let mut shutdown = std::pin::pin!(shutdown);

        loop {
            let free = slots.available_permits();
            let mut sleep_for = inner.poll_interval;
            if free > 0 {
                match self.claim(free).await {
                    Ok(claimed) => {
                        failures.recovered();
                        let full = claimed.len() == free;
                        for (claim, running) in claimed {
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                                break;
                            };
                            let worker = self.clone();
                            let stopping = Arc::clone(&stopping);
                            tasks.spawn(
                                async move {
                                    worker.run_claim(claim, running, &stopping).await;
                                    drop(permit);
                                }
                                .in_current_span(),
                            );
                        }
                        if full {
                            continue;
                        }
                        if let Ok(Some(due_in)) = inner
                            .store
                            .next_due_ms(&inner.queues, inner.runner.registered())
                            .await
                        {
                            // A step due now that the claim skipped is locked by
                            // someone else: look again shortly, not at once.
                            let due_in =
                                Duration::from_millis(u64::try_from(due_in.max(25)).unwrap_or(25));
                            sleep_for = sleep_for.min(due_in);
                        }
                    }
                    Err(error) => sleep_for = failures.failed(&error),
                }
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = wake.notified() => {}
                () = tokio::time::sleep(sleep_for) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }

        info!(target: WORKER_TARGET, { pgbus.worker = %inner.id, pgbus.running = tasks.len() }, "worker stopping");
        stopping.store(true, Ordering::Release);
        stop_listening.store(true, Ordering::Relaxed);
        spawned.stop_listener();
        // Heartbeats go on while bodies drain, so their claims are not taken
        // for lost.
        let drained = tokio::time::timeout(inner.shutdown_grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        spawned.stop_upkeep();
        if drained.is_err() {
            warn!(target: WORKER_TARGET, { pgbus.worker = %inner.id, pgbus.abandoned = tasks.len() }, "shutdown grace ran out; abandoning running bodies to the sweep");
            tasks.abort_all();
            // Let the aborted bodies be dropped (each takes its claim off the
            // running list as it goes).
            while tasks.join_next().await.is_some() {}
        }
        // The last loop to stop removes the row, unless bodies still run here
        // (another clone's `run_once`): whatever this worker abandoned then
        // counts as lost at once. A later claim writes the row again.
        let last = spawned.leave();
        let idle = inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        if last && idle {
            inner.registered.store(false, Ordering::Release);
            if let Err(error) = inner.store.delete_workers(Some(&inner.id), None).await {
                debug!(target: WORKER_TARGET, { error = %display_chain(&error) }, "could not remove the worker row");
            }
        }
        info!(target: WORKER_TARGET, { pgbus.worker = %inner.id }, "worker stopped");
        Ok(())
    }

    /// Claims what is due now (up to the concurrency) and runs it all to the end,
    /// one attempt per claim (never eagerly: the next step of a run goes back
    /// to the queue). Returns how many attempts ran. Meant for tests and
    /// scripts that go step by step.
    ///
    /// # Errors
    /// Database errors from the claim.
    pub async fn run_once(&self) -> Result<usize, Error> {
        self.run_claimed(false).await
    }

    /// Claims and runs until nothing is due now. Steps run eagerly as under
    /// [`Worker::run_until`] (a slot goes on with a run's next step when it is
    /// due at once, up to [`WorkerBuilder::eager_steps`](super::WorkerBuilder::eager_steps) in a row), so the
    /// runs move as a long-running worker would move them. Returns how many
    /// attempts ran.
    ///
    /// # Errors
    /// Database errors from a claim.
    pub async fn run_until_idle(&self) -> Result<usize, Error> {
        let mut total = 0;
        loop {
            let ran = self.run_claimed(true).await?;
            if ran == 0 {
                return Ok(total);
            }
            total += ran;
        }
    }

    /// One claim and its attempts to the end, eagerly or not; how many
    /// attempts ran.
    async fn run_claimed(&self, eager: bool) -> Result<usize, Error> {
        let claimed = self.claim(self.inner.concurrency).await?;
        let mut tasks = JoinSet::new();
        // Set: no slot takes a step eagerly.
        let stopping = Arc::new(AtomicBool::new(!eager));
        for (claim, running) in claimed {
            let worker = self.clone();
            let stopping = Arc::clone(&stopping);
            tasks.spawn(async move { worker.run_claim(claim, running, &stopping).await });
        }
        let mut count = 0;
        while let Some(ran) = tasks.join_next().await {
            count += ran.unwrap_or(1);
        }
        Ok(count)
    }

    /// Claims up to `limit` attempts and puts each on the running list before
    /// returning, so a heartbeat never takes a fresh claim for an orphan.
    async fn claim(&self, limit: usize) -> Result<Vec<(Claim, Running)>, Error> {
        self.ensure_registered().await?;
        let inner = &self.inner;
        let claimed = inner.runner.claim(&inner.queues, limit).await?;
        let hooks = Hooks(self);
        Ok(claimed
            .into_iter()
            .map(|claim| {
                let running = hooks.track(&claim);
                (claim, running)
            })
            .collect())
    }

    /// Runs one claimed attempt and records its outcome; then, while the
    /// outcome hands this worker the run's next step (see
    /// [`WorkerBuilder::eager_steps`](super::WorkerBuilder::eager_steps)) and `stopping` is not set, runs that one
    /// too, up to the eager limit.
    /// Returns how many attempts ran (the claimed one and those taken eagerly).
    async fn run_claim(&self, claim: Claim, running: Running, stopping: &AtomicBool) -> usize {
        let inner = &self.inner;
        inner
            .runner
            .run_claim(claim, running, &Hooks(self), inner.eager_steps, stopping)
            .await
    }
}

/// The worker as the observer of its runner's attempts: each on the running
/// list while it runs, and error reports after commit.
struct Hooks<'a>(&'a Worker);

impl Observe for Hooks<'_> {
    type Tracked = Running;

    fn track(&self, claim: &Claim) -> Running {
        Running::new(
            Arc::clone(&self.0.inner),
            claim.step_id,
            claim.cancellation.clone(),
        )
    }

    fn attempted(&self, attempted: &Attempted<'_>) {
        let Some(Ended::Applied(plan) | Ended::Continued(plan, _)) = attempted.ended else {
            return;
        };
        let (claim, result) = (attempted.claim, attempted.result);
        if let (true, Some(error)) = (result.report, &result.error) {
            self.0.report(
                claim,
                result,
                error,
                failure_level(plan.step_outcome),
                "step failed",
            );
        }
        if let Some(error) = &result.handler_error {
            self.0.report(
                claim,
                result,
                error,
                Level::ERROR,
                "exception handler failed; the run is paused",
            );
        }
    }
}

/// An attempt on the worker's running list for as long as it lives: taken off
/// when its task ends, or is dropped at shutdown.
struct Running {
    inner: Arc<Inner>,
    step_id: i64,
}

impl Running {
    fn new(inner: Arc<Inner>, step_id: i64, cancellation: CancellationToken) -> Self {
        inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(step_id, cancellation);
        Self { inner, step_id }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.step_id);
    }
}

/// What one `run_until` loop started: its place in the worker's count of
/// loops, its `LISTEN` task and its heartbeat-and-sweep task. Dropped with
/// the loop's future however that ends (a clean stop, a `select!` that went
/// the other way, an aborted task): the tasks are aborted, so they and the
/// worker clone the upkeep task holds do not outlive the loop, and the loop
/// leaves the count. The tasks' connections close with them: the `LISTEN`
/// session at once, the upkeep pool with the last clone of the worker. A
/// dropped loop leaves the worker row (no statement can run in `drop`); its
/// heartbeat stops, so the sweep takes the row's attempts for lost and later
/// removes the row.
struct Spawned<'a> {
    loops: &'a AtomicUsize,
    counted: bool,
    listener: Option<JoinHandle<()>>,
    upkeep: Option<JoinHandle<()>>,
}

impl<'a> Spawned<'a> {
    /// Counts a loop in `loops`, with nothing spawned yet.
    fn enter(loops: &'a AtomicUsize) -> Self {
        loops.fetch_add(1, Ordering::AcqRel);
        Self {
            loops,
            counted: true,
            listener: None,
            upkeep: None,
        }
    }

    fn stop_listener(&mut self) {
        if let Some(task) = self.listener.take() {
            task.abort();
        }
    }

    fn stop_upkeep(&mut self) {
        if let Some(task) = self.upkeep.take() {
            task.abort();
        }
    }

    /// Leaves the count of loops; whether this was the last loop running.
    fn leave(&mut self) -> bool {
        if !std::mem::take(&mut self.counted) {
            return false;
        }
        self.loops.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

impl Drop for Spawned<'_> {
    fn drop(&mut self) {
        self.stop_listener();
        self.stop_upkeep();
        self.leave();
    }
}
