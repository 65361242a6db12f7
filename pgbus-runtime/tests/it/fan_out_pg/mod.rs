//! Fan-out on a real server: a batch and its children created together, the
//! parent resumed once when the last child ends (or its `on_batch_failure`
//! applied), an empty batch, cancels cascading down the tree, a fresh batch
//! after resume, the sweep resolving what the children's own transactions
//! missed, a batch that cannot be stored in full, 1,000 children ending at once
//! on three workers, and a parent cancelled while its tree runs.

mod batch;
mod cancel;
mod crash;
mod resume;
mod scale;
mod unstorable;

use std::sync::{Arc, Mutex};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, ErrorReport, EventView, RunView};

use crate::pg::TestDb;

/// A worker of `db` that polls (most tests drive it step by step).
fn polling(db: &Database) -> pgbus_runtime::WorkerBuilder {
    db.worker().notifications(false)
}

/// The run's events named `event`.
fn named<'a>(view: &'a RunView, event: &str) -> Vec<&'a EventView> {
    view.events.iter().filter(|e| e.event == event).collect()
}

/// The children of batch `batch`, in the order they were created.
async fn children(t: &TestDb, batch: i64) -> Vec<RunId> {
    t.query(
        "SELECT id FROM {schema}.runs WHERE parent_batch_id = $1 ORDER BY id",
        &[&batch],
    )
    .await
    .iter()
    .map(|row| RunId(row.get(0)))
    .collect()
}

/// Collects what a worker's policies report.
fn collect(reports: &Arc<Mutex<Vec<ErrorReport>>>) -> impl Fn(&ErrorReport) + use<> {
    let reports = Arc::clone(reports);
    move |report| reports.lock().unwrap().push(report.clone())
}

/// What a child does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Kid {
    Finish,
    Cancel,
}

/// A child run: one step that completes, or cancels its run.
struct Leaf;

#[workflow(name = "fan.leaf", input = Kid)]
impl Leaf {
    #[step]
    async fn work(&self, cx: &mut StepCx<Kid>) -> Flow {
        match cx.input() {
            Kid::Finish => Flow::Complete,
            Kid::Cancel => Flow::cancel("the child gave up"),
        }
    }
}

/// Starts a `Leaf` for each kid of the input.
fn spread_kids(cx: &StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
    for kid in cx.input() {
        fan.start::<Leaf>(kid)?;
    }
    Ok(Flow::Complete)
}

/// Child runs numbered by their input.
struct Numbered;

#[workflow(name = "fan.numbered", input = u32)]
impl Numbered {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}
