//! The operator's actions on a run: `pgbus pause`, `resume`, `cancel`, `skip`
//! and `signal`.

use pgbus_runtime::{Database, RunId};

use super::BoxError;
use crate::Action;
use crate::output::Output;

/// A payload from `path`, or from standard input for `-`.
pub(super) fn read_payload(path: &std::path::Path) -> Result<String, BoxError> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    text.map_err(|e| format!("--payload-file {}: {e}", path.display()).into())
}

pub(super) async fn signal(
    db: &Database,
    out: Output,
    run: i64,
    name: &str,
    payload: Option<String>,
    unchecked: bool,
) -> Result<(), BoxError> {
    let payload: serde_json::Value = match payload {
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| format!("--payload is not JSON: {e}"))?
        }
        None => serde_json::Value::Null,
    };
    let client = db.client();
    let id = if unchecked {
        client.signal_unchecked(RunId(run), name, &payload).await?
    } else {
        client.signal(RunId(run), name, &payload).await?
    };
    // The name first: the id only tells this signal from others of its name.
    out.line(&format!(
        "signal `{name}` sent to run {run} (signal id {})",
        id.0
    ))?;
    Ok(())
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Verb {
    Pause,
    Resume,
    Cancel,
    Skip,
}

pub(super) async fn act(
    db: &Database,
    out: Output,
    action: &Action,
    verb: Verb,
) -> Result<(), BoxError> {
    let actor = action.actor.clone().unwrap_or_else(default_actor);
    let client = db.client();
    let run = action.run_id();
    let reason = action.reason.as_str();
    let status = match verb {
        Verb::Pause => client.pause(run, &actor, reason).await?,
        Verb::Resume => client.resume(run, &actor, reason).await?,
        Verb::Cancel => client.cancel(run, &actor, reason).await?,
        Verb::Skip => client.skip(run, &actor, reason).await?,
    };
    out.line(&format!("run {}: {status}", run.0))?;
    Ok(())
}

/// `cli:$USER`, or `cli`.
pub(super) fn default_actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.trim().is_empty())
        .map_or_else(|| "cli".to_owned(), |user| format!("cli:{}", user.trim()))
}
