//! `pgbus runs`: list runs.

use comfy_table::Cell;
use pgbus_runtime::view::RunFilter;
use pgbus_runtime::{Database, RunId};

use super::text::{json_visible, render};
use super::{BoxError, db_now, time, visible};
use crate::RunsArgs;
use crate::output::Output;

pub(super) async fn runs(db: &Database, out: Output, args: RunsArgs) -> Result<(), BoxError> {
    let now = db_now(db).await?;
    let mut filter = RunFilter::new().limit(args.limit);
    filter.workflow = args.workflow;
    filter.status = args.status;
    filter.before = args.before.map(RunId);
    filter.created_after = args.since.map(|d| now - delta(d));
    filter.created_before = args.older_than.map(|d| now - delta(d));
    let runs = db.client().list_runs(&filter).await?;
    if args.json {
        return Ok(out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&runs)?)
        ))?);
    }
    if runs.is_empty() {
        return Ok(out.line("no runs match")?);
    }
    let mut table = out.table(&["id", "workflow", "status", "step", "created", "updated"]);
    for run in &runs {
        table.add_row(vec![
            Cell::new(run.id.0),
            Cell::new(visible(&run.workflow)),
            out.status(run.status),
            Cell::new(visible(run.current_step.as_deref().unwrap_or("-"))),
            Cell::new(time(run.created_at)),
            Cell::new(time(run.updated_at)),
        ]);
    }
    out.emit(&format!("{}\n", render(&table)))?;
    Ok(())
}

fn delta(duration: std::time::Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(duration).unwrap_or(chrono::TimeDelta::MAX)
}
