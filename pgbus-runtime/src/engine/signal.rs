//! Whether a signal's name is one the run's workflow waits for: the check
//! every store's `signal` applies before storing anything.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::context::RunId;
use crate::error::Error;

/// How a store's [`signal`](crate::store::Store::signal) treats the name it
/// is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalCheck {
    /// Refused with [`Error::UnknownSignal`] unless some definition of the
    /// run's workflow waits for it (see [`check_signal_target`]). What
    /// `Client::signal`, `TestEnv::signal` and `pgbus signal` do.
    Waited,
    /// Stored whatever the definitions say: a signal meant for a step that a
    /// later version of the workflow will add (`Client::signal_unchecked`,
    /// `pgbus signal --unchecked`).
    Unchecked,
}

/// How many waited-for names [`Error::UnknownSignal`]'s message lists; the
/// error itself carries them all.
pub const LISTED_SIGNAL_NAMES: usize = 10;

/// Whether a signal named `name` may be stored for run `run_id` of
/// `workflow`. `waited` is what the store knows the workflow's steps wait
/// for (`wait_for`), the union of: the run's own step plan (the definition
/// it started with), every definition of the workflow a worker registered
/// (live or not: a signal is durable and waits for a worker, so it must not
/// depend on which workers are up as it is sent), and the names the run's
/// parked steps wait for now. `None` when the store knows nothing to judge
/// by (a run started before runs recorded their step plan, of a workflow no
/// worker of this version registered): the signal is then stored.
///
/// # Errors
/// [`Error::UnknownSignal`] when `waited` is known and lacks `name`, with the
/// names it holds (sorted) and the closest of them when one is close
/// enough to be a typo: the same name in another case, else one within a
/// Jaro-Winkler similarity of 0.8 (`pgbus_core::closest`).
pub fn check_signal_target(
    run_id: RunId,
    workflow: &str,
    name: &str,
    waited: Option<&BTreeSet<String>>,
) -> Result<(), Error> {
    let Some(waited) = waited else {
        return Ok(());
    };
    if waited.contains(name) {
        return Ok(());
    }
    let lower = name.to_lowercase();
    let suggestion = waited
        .iter()
        .find(|candidate| candidate.to_lowercase() == lower)
        .map(String::as_str)
        .or_else(|| pgbus_core::closest(name, waited.iter().map(String::as_str)))
        .map(str::to_owned);
    Err(Error::UnknownSignal {
        run_id,
        workflow: workflow.to_owned(),
        name: name.to_owned(),
        waited_for: waited.iter().cloned().collect(),
        suggestion,
    })
}

/// [`Error::UnknownSignal`]'s message: what was refused, the likely name,
/// the names waited for (at most [`LISTED_SIGNAL_NAMES`]), and what to do
/// for a signal meant for a later version.
#[must_use]
pub fn describe_unknown_signal(
    run_id: RunId,
    workflow: &str,
    name: &str,
    waited_for: &[String],
    suggestion: Option<&str>,
) -> String {
    let mut text = format!("no step of workflow `{workflow}` waits for signal `{name}`");
    if let Some(suggestion) = suggestion {
        let _ = write!(text, "; did you mean `{suggestion}`?");
    }
    if waited_for.is_empty() {
        text.push_str(" (none of its steps waits for a signal)");
    } else {
        let listed: Vec<String> = waited_for
            .iter()
            .take(LISTED_SIGNAL_NAMES)
            .map(|waited| format!("`{waited}`"))
            .collect();
        let _ = write!(text, " (its steps wait for {}", listed.join(", "));
        if waited_for.len() > LISTED_SIGNAL_NAMES {
            let _ = write!(text, " and {} more", waited_for.len() - LISTED_SIGNAL_NAMES);
        }
        text.push(')');
    }
    let _ = write!(
        text,
        "; nothing was sent to run {run_id}. For a step a later version of the workflow will \
         add, send it unchecked (`Client::signal_unchecked`, `pgbus signal --unchecked`)"
    );
    text
}

#[cfg(test)]
mod tests;
