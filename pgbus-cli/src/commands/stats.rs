//! `pgbus stats`: run counts per bucket of a window.

use std::fmt::Write as _;

use pgbus_runtime::{Coverage, Database, InsightsFilter};

use super::text::{json_visible, render, visible};
use super::{BoxError, db_now, time};
use crate::Retention;
use crate::output::Output;

pub(super) async fn stats(
    db: &Database,
    out: Output,
    window: pgbus_runtime::window::Window,
    retention: Retention,
    workflow_prefix: Option<String>,
    json: bool,
) -> Result<(), BoxError> {
    let range = window.at(db_now(db).await?, retention.0);
    let mut filter = InsightsFilter::new();
    filter.workflow_prefix.clone_from(&workflow_prefix);
    let activity = db.client().run_counts(&range, &filter).await?;
    let counts = &activity.buckets;
    if json {
        let value = serde_json::json!({
            "range": range,
            "workflow_prefix": workflow_prefix,
            "buckets": counts,
            "coverage": {
                "started": activity.started,
                "ended": activity.ended,
                "paused": activity.paused,
            },
        });
        out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&value)?)
        ))?;
        return Ok(());
    }
    let mut text = String::new();
    let bucket =
        pgbus_core::format_duration_ms(u64::try_from(range.bucket.as_millis()).unwrap_or(u64::MAX));
    writeln!(
        text,
        "{} from {} to {}, in buckets of {bucket}",
        out.heading(&format!("window {window}")),
        time(range.from),
        time(range.to)
    )?;
    if let Some(prefix) = &workflow_prefix {
        writeln!(text, "workflows starting with {}", visible(prefix))?;
    }
    if range.capped {
        let kept = pgbus_core::format_duration_ms(
            u64::try_from(retention.0.unwrap_or_default().as_millis()).unwrap_or(u64::MAX),
        );
        writeln!(
            text,
            "cut to {kept}, the retention age: ended runs last changed before then are deleted, so older buckets would undercount"
        )?;
    }
    for (what, coverage) in [
        ("runs started", &activity.started),
        ("runs ended", &activity.ended),
        ("pauses", &activity.paused),
    ] {
        if let Some(line) = partial_line(what, coverage) {
            writeln!(text, "{line}")?;
        }
    }
    let mut table = out.table(&["bucket", "started", "finished", "paused", "cancelled"]);
    let mut totals = [0_i64; 4];
    let mut children = [0_i64; 3];
    for b in counts {
        let row = [b.started, b.finished, b.paused, b.cancelled];
        for (total, n) in totals.iter_mut().zip(row) {
            *total += n;
        }
        let of_children = [
            b.children.started,
            b.children.finished,
            b.children.cancelled,
        ];
        for (total, n) in children.iter_mut().zip(of_children) {
            *total += n;
        }
        table.add_row(vec![
            time(b.bucket),
            b.started.to_string(),
            b.finished.to_string(),
            b.paused.to_string(),
            b.cancelled.to_string(),
        ]);
    }
    table.add_row(vec![
        "total".to_owned(),
        totals[0].to_string(),
        totals[1].to_string(),
        totals[2].to_string(),
        totals[3].to_string(),
    ]);
    if children.iter().any(|n| *n > 0) {
        writeln!(
            text,
            "fan-out children among them: {} started, {} finished, {} cancelled",
            children[0], children[1], children[2]
        )?;
    }
    writeln!(text, "{}", render(&table))?;
    out.emit(&text)?;
    Ok(())
}

/// What a partial part of the read says: which rows it counted.
fn partial_line(what: &str, coverage: &Coverage) -> Option<String> {
    if !coverage.partial {
        return None;
    }
    let since = coverage
        .oldest_read
        .map_or_else(String::new, |at| format!(" back to {}", time(at)));
    Some(format!(
        "{what}: counted the newest {} only{since}; older buckets undercount",
        coverage.read
    ))
}
