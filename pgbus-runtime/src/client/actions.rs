//! Operator actions on a run (pause, resume, cancel, skip) and signals.

use tracing::instrument;

use super::Client;
use crate::context::{RunId, SignalId};
use crate::engine::{Action, RunStatus, SignalCheck};
use crate::error::Error;

impl Client {
    /// Pauses a run: nothing new of it is claimed until [`Client::resume`]. A step
    /// that is running when the pause lands still records its outcome, and its
    /// next row is scheduled but held; if it was the last step, the run finishes.
    /// `actor` (who, e.g. `alice@ops`) and `reason` go on the `paused` event.
    /// Returns the run's new status.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is already paused or has ended,
    /// [`Error::RunNotFound`], [`Error::InvalidActor`], [`Error::InvalidReason`]
    /// (see [`check_reason`](super::check_reason)), and database errors.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn pause(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Pause, actor, reason).await
    }

    /// Resumes a paused run: a held row goes on; a step that failed and paused
    /// the run runs again now as a new attempt, with its reattempt count reset; a
    /// step that paused the run with `Flow::Pause` is followed by the next step
    /// (after its `wait`), or the run finishes. Writes a `resumed` event.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is not paused, and the errors of
    /// [`Client::pause`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn resume(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Resume, actor, reason).await
    }

    /// Cancels a run that has not ended: every open step row is cancelled, and a
    /// body still running has its completion ignored (and is told through
    /// [`StepCx::cancelled`](crate::StepCx::cancelled) at the worker's next
    /// heartbeat). Writes a `cancelled` event.
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run has ended, and the errors of
    /// [`Client::pause`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn cancel(
        &self,
        run_id: RunId,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Cancel, actor, reason).await
    }

    /// Skips the step a paused run would run on resume, and lets the run go on
    /// from the step after it (or finish): a held row is marked `skipped`; a
    /// failed step is passed over. Writes `step_skipped`, then `resumed` (or
    /// `finished`).
    ///
    /// # Errors
    /// [`Error::IllegalMove`] when the run is not paused, its step is still
    /// running, or nothing is pending (the step completed and paused the run with
    /// `Flow::Pause`: resume instead), and the errors of [`Client::pause`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.actor = actor), err(level = "debug"))]
    pub async fn skip(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Skip, actor, reason).await
    }

    async fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let reason = super::checked_reason(actor, reason)?;
        self.store.act(run_id, action, actor, &reason).await
    }

    /// Sends signal `name` with `payload` to a run: stored under the run's lock,
    /// recorded as a `signal_received` event (reason: the name), and waking the
    /// run's steps that wait for `name`. A signal sent before any step waits for
    /// it is kept until one does; each signal is consumed by one attempt. A
    /// paused run keeps it, and goes on with it once resumed.
    ///
    /// The name must be one some step of the run's workflow waits for
    /// (`wait_for`): in the definition the run started with, in any
    /// definition of the workflow a worker registered (running now or not),
    /// or as a step of the run parked now. Otherwise the signal, which no
    /// step would ever take, is refused with the names that are waited for
    /// and the closest of them. A signal for a step a later version will add
    /// goes through [`Client::signal_unchecked`].
    ///
    /// # Errors
    /// [`Error::InvalidSignal`] for a bad name or payload (a NUL character,
    /// over the size or depth limits); [`Error::RunNotFound`] for a missing
    /// run and [`Error::RunEnded`] for a finished or cancelled one;
    /// [`Error::UnknownSignal`] for a name no step waits for; [`Error::Json`]
    /// when the payload does not serialize; database errors. Nothing is
    /// stored on an error.
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.signal = name), err(level = "debug"))]
    pub async fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, Error> {
        self.send(run_id, name, payload, SignalCheck::Waited).await
    }

    /// [`Client::signal`] without the check of the name against the
    /// workflow's definitions: for a signal meant for a step that a later
    /// version of the workflow adds, sent before that version is deployed
    /// (it is kept until a step of that name waits for it). A mistyped name
    /// sent this way is stored and waits for ever, as any unconsumed signal.
    ///
    /// # Errors
    /// As [`Client::signal`], without [`Error::UnknownSignal`].
    #[instrument(target = "pgbus_runtime::client", skip_all, fields(pgbus.run_id = %run_id, pgbus.signal = name), err(level = "debug"))]
    pub async fn signal_unchecked<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, Error> {
        self.send(run_id, name, payload, SignalCheck::Unchecked)
            .await
    }

    async fn send<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
        check: SignalCheck,
    ) -> Result<SignalId, Error> {
        let payload = serde_json::to_value(payload)?;
        self.store.limits.check_signal(name, &payload)?;
        self.store.signal(run_id, name, &payload, check).await
    }
}
