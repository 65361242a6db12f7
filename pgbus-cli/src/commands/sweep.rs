//! `pgbus sweep`: one pass of the sweeper.

use pgbus_runtime::{Database, StallAction};

use super::BoxError;
use crate::output::Output;

pub(super) async fn sweep(
    db: &Database,
    out: Output,
    stall_action: &str,
    lost_worker_threshold: std::time::Duration,
    retention: Option<std::time::Duration>,
) -> Result<(), BoxError> {
    let action = if stall_action == "cancel" {
        StallAction::Cancel
    } else {
        StallAction::Pause
    };
    let sweeper = db
        .worker()
        .stall_action(action)
        .lost_worker_threshold(lost_worker_threshold)
        .retention(retention)
        .sweeper()?;
    let report = sweeper.sweep().await?;
    out.line(&format!(
        "repaired {} stalled attempts ({} had ended meanwhile), resolved {} batches, \
         deleted {} runs past retention, removed {} silent worker rows, \
         paused {} runs at a step no live worker has, \
         cancelled or paused {} runs past their deadline",
        report.repaired,
        report.left_alone,
        report.batches_resolved,
        report.runs_deleted,
        report.workers_removed,
        report.undefined_paused,
        report.deadlines_exceeded
    ))?;
    Ok(())
}
