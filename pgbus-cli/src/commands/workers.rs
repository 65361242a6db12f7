//! `pgbus workers`: the live workers and what each runs.

use std::fmt::Write as _;
use std::time::Duration;

use comfy_table::Cell;
use pgbus_runtime::Database;

use super::text::{json_visible, render};
use super::{BoxError, took, visible};
use crate::output::Output;

/// How many characters of a definition digest a listing shows: enough to tell
/// the versions of one workflow apart.
pub(crate) const SHORT_DIGEST: usize = 12;

pub(super) async fn workers(
    db: &Database,
    out: Output,
    lost_worker_threshold: Duration,
    limit: u32,
    json: bool,
) -> Result<(), BoxError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let workers = db.client().workers(lost_worker_threshold, limit).await?;
    if json {
        return Ok(out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&workers)?)
        ))?);
    }
    if workers.is_empty() {
        return Ok(out.line("no live workers")?);
    }
    let mut table = out.table(&[
        "name",
        "host",
        "pid",
        "queues",
        "concurrency",
        "workflows",
        "in flight",
        "heartbeat",
    ]);
    for worker in &workers {
        let workflows: Vec<String> = worker
            .workflows
            .iter()
            .map(|w| {
                let short: String = w.digest.chars().take(SHORT_DIGEST).collect();
                // Run with per-deployment overrides: `--json` lists them.
                let overridden = if w.overrides.is_some() {
                    " (overridden)"
                } else {
                    ""
                };
                format!("{} {short}{overridden}", visible(&w.workflow))
            })
            .collect();
        let age = chrono::Duration::from_std(worker.heartbeat_age).unwrap_or(chrono::Duration::MAX);
        table.add_row(vec![
            Cell::new(visible(worker.name.as_deref().unwrap_or(&worker.id))),
            Cell::new(visible(&worker.host)),
            Cell::new(worker.pid),
            Cell::new(visible(&worker.queues.join(", "))),
            Cell::new(
                worker
                    .concurrency
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
            ),
            Cell::new(if workflows.is_empty() {
                "-".to_owned()
            } else {
                workflows.join("\n")
            }),
            Cell::new(worker.in_flight),
            Cell::new(format!("{} ago", took(age))),
        ]);
    }
    let mut text = render(&table);
    if workers.len() == limit {
        write!(
            text,
            "\nthe first {limit}; `--limit` lists more (up to 1000)"
        )?;
    }
    out.emit(&format!("{text}\n"))?;
    Ok(())
}
