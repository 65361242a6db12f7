//! `pgbus deploy-check FILE`: what a worker's definitions would do to the runs
//! in flight, before they are deployed.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use comfy_table::Cell;
use pgbus_runtime::Database;
use pgbus_runtime::deploy::{Definitions, DeployReport, MAX_DEPLOY_POSITIONS, PositionCheck};
use pgbus_runtime::engine::VerdictKind;

use super::text::{json_visible, render};
use super::workers::SHORT_DIGEST;
use super::{BoxError, visible};
use crate::output::Output;

/// The exit code when some run in flight would pause or wait: apart from 1
/// (an error, a bad FILE included) and 2 (a bad command line).
pub(crate) const STOPS_RUNS: u8 = 3;

/// The most bytes of a definitions document read: far more than any worker's.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads and checks the definitions document at `path` (`-`: standard
/// input), before anything connects.
pub(super) fn read_definitions(path: &Path) -> Result<Definitions, BoxError> {
    let shown = if path == Path::new("-") {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
    };
    read.map_err(|e| format!("cannot read the definitions file {}: {e}", visible(&shown)))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "the definitions file {} is over {} MiB: not a definitions document",
            visible(&shown),
            MAX_FILE_BYTES >> 20
        )
        .into());
    }
    Definitions::parse(&text).map_err(|e| format!("{}: {e}", visible(&shown)).into())
}

pub(super) async fn deploy_check(
    db: &Database,
    out: Output,
    definitions: &Definitions,
    lost_worker_threshold: Duration,
    json: bool,
) -> Result<ExitCode, BoxError> {
    let report = db
        .client()
        .deploy_check(definitions, lost_worker_threshold)
        .await?;
    if json {
        out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&report)?)
        ))?;
    } else {
        out.emit(&text(out, &report)?)?;
    }
    if report.truncated {
        return Err(format!(
            "more than {MAX_DEPLOY_POSITIONS} distinct positions of runs in flight: the counts above are not complete"
        )
        .into());
    }
    Ok(if report.stops_runs() {
        ExitCode::from(STOPS_RUNS)
    } else {
        ExitCode::SUCCESS
    })
}

fn short(digest: &str) -> String {
    digest.chars().take(SHORT_DIGEST).collect()
}

/// The report as a table of counts per workflow and digest, then the
/// positions that do not simply advance, then the verdict in one line.
fn text(out: Output, report: &DeployReport) -> Result<String, BoxError> {
    let mut table = out.table(&[
        "workflow",
        "digest",
        "runs",
        "advances",
        "skips gravestone",
        "misses inserted",
        "pauses",
        "waits",
    ]);
    let mut details = String::new();
    for workflow in &report.workflows {
        let name = visible(&workflow.workflow);
        let live: Vec<String> = workflow
            .live
            .iter()
            .map(|l| {
                let plural = if l.workers == 1 { "" } else { "s" };
                format!("{} ({} worker{plural})", short(&l.digest), l.workers)
            })
            .collect();
        writeln!(
            details,
            "{name}: new digest {}; live now: {}",
            short(&workflow.new_digest),
            if live.is_empty() {
                "none".to_owned()
            } else {
                live.join(", ")
            }
        )?;
        if workflow.digests.is_empty() {
            let mut row = vec![Cell::new(&name), Cell::new("-")];
            row.extend((0..=VerdictKind::ALL.len()).map(|_| Cell::new(0)));
            table.add_row(row);
        }
        for digest in &workflow.digests {
            let mut row = vec![
                Cell::new(&name),
                Cell::new(short(&digest.digest)),
                Cell::new(digest.counts.total()),
            ];
            row.extend(
                VerdictKind::ALL
                    .iter()
                    .map(|kind| Cell::new(digest.counts.get(*kind))),
            );
            table.add_row(row);
            for position in digest
                .positions
                .iter()
                .filter(|p| p.verdict.verdict != VerdictKind::Advances)
            {
                writeln!(
                    details,
                    "  {}  {}",
                    short(&digest.digest),
                    position_line(position)
                )?;
            }
        }
    }
    let mut text = render(&table);
    text.push_str("\n\n");
    text.push_str(&details);
    if !report.unchecked.is_empty() {
        let names: Vec<String> = report.unchecked.iter().map(|n| visible(n)).collect();
        writeln!(
            text,
            "not checked (registered by live workers, not in the file): {}",
            names.join(", ")
        )?;
    }
    let stopped = report.counts.stopped();
    if stopped > 0 {
        writeln!(
            text,
            "{stopped} of {} runs in flight would pause or wait",
            report.counts.total()
        )?;
    } else {
        writeln!(
            text,
            "no run in flight would pause or wait ({} checked)",
            report.counts.total()
        )?;
    }
    Ok(text)
}

/// `3 runs at charge (scheduled, ready): pauses with StepNotDefined at ...`.
fn position_line(position: &PositionCheck) -> String {
    let at = position.step.as_deref().map_or_else(
        || "no step".to_owned(),
        |step| format!("`{}`", visible(step)),
    );
    let status = position
        .step_status
        .map_or_else(String::new, |s| format!("{s}, "));
    format!(
        "{} run{} at {at} ({status}{}): {}",
        position.runs,
        if position.runs == 1 { "" } else { "s" },
        position.run_status,
        visible(&position.verdict.to_string()),
    )
}
