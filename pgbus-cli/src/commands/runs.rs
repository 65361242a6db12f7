//! `pgbus runs`: list runs.

use comfy_table::Cell;
use pgbus_runtime::view::{Missing, RunFilter};
use pgbus_runtime::{Database, RunId};

use super::text::{json_visible, render};
use super::{BoxError, db_now, time, visible};
use crate::RunsArgs;
use crate::output::Output;

pub(super) async fn runs(db: &Database, out: Output, args: RunsArgs) -> Result<(), BoxError> {
    let now = db_now(db).await?;
    let mut filter = RunFilter::new()
        .limit(args.limit)
        .lost_worker_threshold(args.lost_worker_threshold);
    // A trailing `*` on an exact name is likely a prefix meant: said below
    // when nothing matches, never guessed (a workflow's name may hold `*`).
    let starred = args.workflow.as_ref().is_some_and(|w| w.ends_with('*'));
    filter.workflow = args.workflow;
    filter.workflow_prefix = args.workflow_prefix;
    filter.top_level = args.top_level;
    filter.parent = args.parent.map(RunId);
    filter.idempotency_key = args.key;
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
        if starred {
            return Ok(out.line(
                "no runs match (`--workflow` takes a name exactly; `--workflow-prefix` lists by prefix)",
            )?);
        }
        return Ok(out.line("no runs match")?);
    }
    // The mark's column only when a listed run has one: a healthy listing
    // reads as it always did.
    let marked = runs.iter().any(|run| run.unrunnable.is_some());
    let mut header = vec![
        "id", "workflow", "status", "step", "parent", "children", "created", "updated",
    ];
    if marked {
        header.push("cannot run");
    }
    let mut table = out.table(&header);
    for run in &runs {
        let mut row = vec![
            Cell::new(run.id.0),
            Cell::new(visible(&run.workflow)),
            out.status(run.status),
            Cell::new(visible(run.current_step.as_deref().unwrap_or("-"))),
            Cell::new(
                run.parent_run
                    .map_or_else(|| "-".to_owned(), |p| p.0.to_string()),
            ),
            Cell::new(if run.children == 0 {
                "-".to_owned()
            } else {
                run.children.to_string()
            }),
            Cell::new(time(run.created_at)),
            Cell::new(time(run.updated_at)),
        ];
        if marked {
            row.push(Cell::new(mark(run.unrunnable)));
        }
        table.add_row(row);
    }
    let mut text = render(&table);
    if marked {
        text.push_str(
            "\ncannot run: no live worker has the workflow, or the step, the run waits on, or \
             claims from its queue; `pgbus show <id>` says which and since when",
        );
    }
    out.emit(&format!("{text}\n"))?;
    Ok(())
}

/// The `cannot run` column's word for what no live worker has.
fn mark(missing: Option<Missing>) -> &'static str {
    match missing {
        None => "-",
        Some(Missing::Step) => "step missing",
        Some(Missing::Queue) => "queue unclaimed",
        Some(_) => "workflow missing",
    }
}

fn delta(duration: std::time::Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(duration).unwrap_or(chrono::TimeDelta::MAX)
}
