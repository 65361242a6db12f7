//! The `wait_for` gate on a real server: a signal is consumed at the gate whether
//! it came before the step waited or woke the parked row; predicates leave what
//! they turn down; a reattempt sees the signal its step consumed; each
//! `on_timeout` fires once, across a worker restart; the edges of a wait (a
//! signal on the deadline, one after the claim decided, one while the step is in
//! progress, one for a paused run); and 10,000 signals racing their waits.

mod consume;
mod in_progress;
mod pages;
mod race;
mod reattempt;
mod timeout;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Client, Database, EventView, MAX_DURATION_MS, RunView};
use serde_json::{Value, json};

use crate::pg::at_ms;

/// Keeps the signal the body saw (`null` when none) as the step's output.
fn keep_signal<I>(cx: &mut StepCx<I>) -> StepResult {
    let payload = cx.signal().map(|s| s.payload.clone());
    cx.output(&json!({ "signal": payload }))?;
    Ok(Flow::Complete)
}

/// Sends a signal from synchronous user code (a guard or a predicate) on the
/// worker's own runtime: how a signal lands while an attempt is in progress.
fn send_now(client: &Client, run: RunId, name: &str, payload: &Value) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(client.signal(run, name, payload))
    })
    .expect("send a signal from inside the attempt");
}

/// A worker of `db` that polls (the tests drive it step by step).
fn polling(db: &Database) -> pgbus_runtime::WorkerBuilder {
    db.worker().notifications(false)
}

/// The run's events named `event`.
fn named<'a>(view: &'a RunView, event: &str) -> Vec<&'a EventView> {
    view.events.iter().filter(|e| e.event == event).collect()
}

/// `t0()` plus `ms`, for the longest wait a parked row without a timeout gets.
fn forever_from(ms: i64) -> chrono::DateTime<chrono::Utc> {
    at_ms(ms + i64::try_from(MAX_DURATION_MS).expect("fits"))
}
