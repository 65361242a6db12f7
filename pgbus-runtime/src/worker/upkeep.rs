//! The worker's upkeep: its row, heartbeats, sweeps, and backing off while the database fails.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{debug, error, info, warn};

use super::{
    RETENTION_BATCH, RETENTION_BATCHES, SweepReport, WORKER_ROW_EXPIRY, WORKER_TARGET, Worker,
    capped_ms, failure_level, host,
};
use crate::engine::RunStatus;
use crate::error::{Error, display_chain};
use crate::store::{Registration, Repair, SweepSettings};

impl Worker {
    /// Writes the worker's registry entry once, before the first claim: its
    /// row (claims put this id on step rows, and the sweep checks those
    /// against the row's heartbeat) and the definitions it runs (the sweep's
    /// grace rule reads them).
    pub(super) async fn ensure_registered(&self) -> Result<(), Error> {
        let inner = &self.inner;
        if !inner.registered.swap(true, Ordering::AcqRel) {
            let pid = i32::try_from(std::process::id()).unwrap_or(0);
            let (host, definitions) = (host(), inner.runner.definitions());
            let registration = Registration {
                worker_id: &inner.id,
                name: &inner.name,
                host: &host,
                pid,
                queues: &inner.queues,
                concurrency: inner.concurrency,
                definitions: &definitions,
                queue_limits: &inner.queue_limits,
            };
            if let Err(error) = inner.store.register_worker(&registration).await {
                inner.registered.store(false, Ordering::Release);
                return Err(error);
            }
            if !inner.declared.is_empty() {
                match inner.store.declare_schedules(&inner.declared).await {
                    Ok(left_alone) => {
                        for name in left_alone {
                            warn!(
                                target: WORKER_TARGET,
                                { pgbus.schedule = %name },
                                "a schedule declared in code has the name of one created through the client; the client's is left as it is"
                            );
                        }
                    }
                    Err(error) => {
                        inner.registered.store(false, Ordering::Release);
                        return Err(error);
                    }
                }
            }
        }
        Ok(())
    }

    /// Fires the due ticks of the schedules of this worker's workflows once
    /// (see [`crate::store::fire_schedules`]): each tick starts one run,
    /// however many workers fire at once; missed ticks follow their
    /// schedule's catch-up policy. `run_until` does this every
    /// [`WorkerBuilder::schedule_interval`](super::WorkerBuilder::schedule_interval);
    /// call it yourself when you drive the worker with `run_once`. Writes the
    /// worker's registry entry and declared schedules first if it has not.
    ///
    /// # Errors
    /// Database errors.
    pub async fn fire_schedules(&self) -> Result<crate::store::FireReport, Error> {
        self.ensure_registered().await?;
        let inner = &self.inner;
        crate::store::fire_schedules(
            &inner.upkeep,
            &inner.workflows,
            |workflow| inner.runner.definition(workflow),
            &crate::store::FireSettings::default(),
        )
        .await
    }

    /// Heartbeats and sweeps on their intervals while the worker runs.
    pub(super) async fn upkeep(self) {
        let inner = &self.inner;
        let mut heartbeat = tokio::time::interval(inner.heartbeat_interval);
        let mut sweep = tokio::time::interval(inner.sweep_interval);
        let mut schedules = tokio::time::interval(inner.schedule_interval);
        schedules.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = schedules.tick() => {
                    if inner.registered.load(Ordering::Acquire)
                        && let Err(error) = self.fire_schedules().await
                    {
                        debug!(target: WORKER_TARGET, { error = %display_chain(&error) }, "firing schedules failed");
                    }
                }
                _ = heartbeat.tick() => {
                    if inner.registered.load(Ordering::Acquire)
                        && let Err(error) = self.heartbeat().await
                    {
                        debug!(target: WORKER_TARGET, { error = %display_chain(&error) }, "heartbeat failed");
                    }
                }
                _ = sweep.tick() => {
                    match self.sweep().await {
                        Ok(report) => {
                            if report.repaired > 0 {
                                // Each repair logged its own line.
                                debug!(target: WORKER_TARGET, { pgbus.repaired = report.repaired }, "sweep repaired stalled attempts");
                            }
                            if report.runs_deleted > 0 || report.workers_removed > 0 {
                                info!(
                                    target: WORKER_TARGET,
                                    {
                                        pgbus.runs_deleted = report.runs_deleted,
                                        pgbus.workers_removed = report.workers_removed,
                                    },
                                    "sweep applied retention"
                                );
                            }
                        }
                        Err(error) => debug!(target: WORKER_TARGET, { error = %display_chain(&error) }, "sweep failed"),
                    }
                }
            }
        }
    }

    /// Refreshes this worker's heartbeat, writes its row again if the sweep
    /// removed it, and tells the bodies whose attempts lost their claim (the run
    /// was cancelled, the sweep stalled the attempt, or another worker claimed
    /// it) through [`StepCx::cancelled`](crate::StepCx::cancelled). `run_until`
    /// does this every heartbeat interval; call it yourself when you drive the
    /// worker with `run_once`.
    ///
    /// # Errors
    /// Database errors.
    pub async fn heartbeat(&self) -> Result<(), Error> {
        let inner = &self.inner;
        let running: Vec<i64> = inner
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        let beat = inner.upkeep.heartbeat(&inner.id, &running).await?;
        // Claimed in the database, unknown here: a claim whose reply was lost
        // with the connection, or a body that could not record its outcome. A
        // claim still on its way back looks the same for a moment, so only rows
        // that two heartbeats in a row report, and that are still not running
        // here, are handed to the sweep (now rather than at their stall horizon).
        let orphans: Vec<i64> = {
            let running = inner
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut suspects = inner
                .suspects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let confirmed = beat
                .orphans
                .iter()
                .copied()
                .filter(|id| suspects.contains(id) && !running.contains_key(id))
                .collect();
            *suspects = beat.orphans.iter().copied().collect();
            confirmed
        };
        if !orphans.is_empty() {
            let released = inner.upkeep.release_orphans(&inner.id, &orphans).await?;
            warn!(
                target: WORKER_TARGET,
                {
                    pgbus.worker = %inner.id,
                    pgbus.released = released,
                },
                "attempts held in the database but not running here; handing them to the sweep"
            );
        }
        let (present, lost) = (beat.present, beat.lost);
        if !present {
            warn!(target: WORKER_TARGET, { pgbus.worker = %inner.id }, "the worker row was gone; writing it again");
            inner.registered.store(false, Ordering::Release);
            self.ensure_registered().await?;
        }
        if !lost.is_empty() {
            let running = inner
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for step_id in lost {
                if let Some(token) = running.get(&step_id) {
                    info!(
                        target: WORKER_TARGET,
                        {
                            pgbus.step_id = step_id,
                        },
                        "attempt lost its claim; telling its body"
                    );
                    token.cancel();
                }
            }
        }
        Ok(())
    }

    /// Sweeps once. First the runs past their deadline (at most 100 a sweep):
    /// each is cancelled or paused as its workflow's `on_deadline` says,
    /// after a `deadline_exceeded` event, actor `deadline` (see
    /// [`Store::expire_deadlines`](crate::store::Store::expire_deadlines)).
    /// Then it repairs stalled attempts: each in-progress attempt past its stall
    /// horizon (detection `timeout`) or held by a worker whose heartbeat is older
    /// than the lost-worker threshold (detection `worker_lost`) ends with a
    /// [`StepStalled`](crate::StepStalled) error, the stall action and a
    /// `stall_detected` event. Fenced: an attempt that ended meanwhile is left
    /// alone. Then the grace rule (see
    /// [`WorkerBuilder::undefined_step_grace`](super::WorkerBuilder::undefined_step_grace)):
    /// a row due for longer than the grace whose step no live worker's
    /// definition holds pauses its run with
    /// [`StepNotDefined`](crate::StepNotDefined). Then retention: finished and cancelled runs last changed before the
    /// retention age are deleted with their rows, at most [`RETENTION_BATCHES`]
    /// batches of [`RETENTION_BATCH`] per sweep (the next sweep goes on), and
    /// worker rows silent for [`WORKER_ROW_EXPIRY`] are removed. Safe to run from
    /// many workers at once (`SKIP LOCKED`, fenced updates); runs inside
    /// `run_until` on the sweep interval.
    ///
    /// # Errors
    /// Database errors.
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        let inner = &self.inner;
        let settings = SweepSettings {
            stall_action: inner.stall_action,
            lost_ms: inner.lost_worker_ms,
            retention_ms: inner.retention_ms,
            stalled_limit: 100,
            batch_limit: 100,
            retention_batch: RETENTION_BATCH,
            retention_batches: RETENTION_BATCHES,
            undefined_grace_ms: inner.undefined_grace_ms,
            undefined_limit: 100,
            deadline_limit: 100,
        };
        let mut report = crate::store::sweep(
            &inner.upkeep,
            &settings,
            |workflow| inner.runner.definition(workflow),
            |repaired| {
                if let Some(record) = &repaired.result.error {
                    let message = match repaired.repair {
                        Repair::Stalled => crate::store::repair_message(repaired.plan),
                        Repair::UndefinedStep => {
                            "no live worker's definition has the step; the run is paused"
                        }
                    };
                    self.report(
                        &repaired.stalled.claim,
                        repaired.result,
                        record,
                        failure_level(repaired.plan.step_outcome),
                        message,
                    );
                }
            },
        )
        .await?;
        if inner.run_gauges {
            let counts = inner.upkeep.run_status_counts().await?;
            for status in [RunStatus::Ready, RunStatus::Performing, RunStatus::Paused] {
                let runs = counts
                    .iter()
                    .find(|(s, _)| s == status.as_str())
                    .map_or(0, |(_, n)| *n);
                #[allow(clippy::cast_precision_loss)] // run counts far below 2^52
                metrics::gauge!(crate::metric::RUNS, "status" => status.as_str()).set(runs as f64);
            }
        }
        let silent_ms = capped_ms(WORKER_ROW_EXPIRY).max(inner.lost_worker_ms);
        report.workers_removed = inner.upkeep.delete_workers(None, Some(silent_ms)).await?;
        Ok(report)
    }
}

/// Consecutive failures of one kind of database call, and the growing pause
/// between tries: from `first_pause`, doubling, up to `longest_pause`, each cut
/// by up to a quarter at random so workers that failed together do not come back
/// in step. The claim loop logs the first failure of a streak (`warn` when it is
/// a connection or server going away, `error` otherwise), the others only at
/// `debug`, and the recovery once at `info`: one outage, one line each way,
/// however long it lasts.
pub(crate) struct Failures {
    pub(crate) count: u32,
    first_pause: Duration,
    longest_pause: Duration,
}

impl Default for Failures {
    /// The claim loop's: 100 ms doubling up to 5 s.
    fn default() -> Self {
        Self::with_pauses(Duration::from_millis(100), Duration::from_secs(5))
    }
}

impl Failures {
    pub(crate) const fn with_pauses(first_pause: Duration, longest_pause: Duration) -> Self {
        Self {
            count: 0,
            first_pause,
            longest_pause,
        }
    }

    /// Counts a failed claim round, logs it (see above) and returns the pause
    /// before the next.
    pub(super) fn failed(&mut self, error: &Error) -> Duration {
        if self.record() {
            if error.is_transient() {
                warn!(target: WORKER_TARGET, { error = %display_chain(error) }, "database unavailable; retrying with backoff");
            } else {
                error!(target: WORKER_TARGET, { error = %display_chain(error) }, "database call failed; retrying with backoff");
            }
        } else {
            debug!(target: WORKER_TARGET, { error = %display_chain(error), pgbus.failures = self.count }, "database still failing");
        }
        self.pause()
    }

    /// Counts a failure; whether it is the first of a streak.
    pub(crate) fn record(&mut self) -> bool {
        self.count = self.count.saturating_add(1);
        self.count == 1
    }

    /// The pause after the failures counted so far.
    pub(crate) fn pause(&self) -> Duration {
        let doublings = self.count.saturating_sub(1).min(16);
        let full = self
            .first_pause
            .saturating_mul(1 << doublings)
            .min(self.longest_pause);
        let noise = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            self.count,
        ) % 1024;
        full.saturating_sub((full / 4).mul_f64(noise as f64 / 1024.0))
    }

    pub(super) fn recovered(&mut self) {
        if self.count > 0 {
            info!(target: WORKER_TARGET, { pgbus.failures = self.count }, "database answers again");
        }
        self.count = 0;
    }
}
