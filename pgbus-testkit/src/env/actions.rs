//! Signals and operator actions on the environment's runs, as the client
//! sends them.

use pgbus_runtime::engine::{Action, RunStatus, SignalCheck};
use pgbus_runtime::{Error, RunId, SignalId};

use super::TestEnv;

impl TestEnv {
    /// Sends a signal to a run, as `Client::signal`: refused unless some
    /// step of the run's workflow waits for `name` (in the definition the
    /// run started with, in a definition registered in the environment, or
    /// as a step of the run parked now).
    ///
    /// # Errors
    /// As `Client::signal`: [`Error::InvalidSignal`], [`Error::RunNotFound`],
    /// [`Error::RunEnded`], [`Error::UnknownSignal`] (with the names waited
    /// for and a did-you-mean), [`Error::Json`].
    pub fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, Error> {
        self.send(run_id, name, payload, SignalCheck::Waited)
    }

    /// Sends a signal whatever the definitions wait for, as
    /// `Client::signal_unchecked`: for a step a later version will add.
    ///
    /// # Errors
    /// As [`TestEnv::signal`], without [`Error::UnknownSignal`].
    pub fn signal_unchecked<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, Error> {
        self.send(run_id, name, payload, SignalCheck::Unchecked)
    }

    fn send<T: serde::Serialize + ?Sized>(
        &self,
        run_id: RunId,
        name: &str,
        payload: &T,
        check: SignalCheck,
    ) -> Result<SignalId, Error> {
        let payload = serde_json::to_value(payload)?;
        self.limits.check_signal(name, &payload)?;
        self.store().rows().signal(run_id, name, payload, check)
    }

    /// Pauses a run, as `Client::pause`.
    ///
    /// # Errors
    /// As `Client::pause`: [`Error::IllegalMove`], [`Error::RunNotFound`],
    /// [`Error::InvalidActor`], [`Error::InvalidReason`].
    pub fn pause(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Pause, actor, reason)
    }

    /// Resumes a paused run, as `Client::resume`.
    ///
    /// # Errors
    /// As `Client::resume`.
    pub fn resume(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Resume, actor, reason)
    }

    /// Cancels a run, as `Client::cancel`; a body still running is told at once
    /// through its context.
    ///
    /// # Errors
    /// As `Client::cancel`.
    pub fn cancel(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Cancel, actor, reason)
    }

    /// Skips the step a paused run would run next, as `Client::skip`.
    ///
    /// # Errors
    /// As `Client::skip`.
    pub fn skip(&self, run_id: RunId, actor: &str, reason: &str) -> Result<RunStatus, Error> {
        self.act(run_id, Action::Skip, actor, reason)
    }

    fn act(
        &self,
        run_id: RunId,
        action: Action,
        actor: &str,
        reason: &str,
    ) -> Result<RunStatus, Error> {
        let reason = pgbus_runtime::client::checked_reason(actor, reason)?;
        self.store().rows().act(run_id, action, actor, &reason)
    }
}
