//! `pgbus show`, and how it and the dashboard's run page cut a run to the
//! latest of each part.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use comfy_table::Table;
use pgbus_runtime::timeline::{DefinitionChange, Segment, definition_changes, timeline};
use pgbus_runtime::view::{HeldBack, Missing, RunRead, RunView, Unrunnable, ValueOf};
use pgbus_runtime::{Database, RunId};

use super::text::{json_visible, render};
use super::{BoxError, db_now, defang, time, took, value_text};
use crate::output::Output;

/// How many of a run's latest attempts, events and signals `show` and the
/// dashboard's run page show unless asked for more (`--last`, `?show=`), and
/// the most they show when asked: a view is bounded in rows and bytes,
/// however long the run.
pub(crate) const SHOWN: usize = 200;
pub(crate) const SHOWN_AT_MOST: usize = 5_000;
/// The most JSON text a value (the input, an output, a signal payload) may
/// have to be read into a view; a longer one is named with its length.
pub(crate) const VALUE_BYTES: usize = 16 * 1024;

/// What a view of a run left out: how many there were of each list.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Cut {
    /// How many of each were kept, at most.
    pub(crate) show: usize,
    pub(crate) attempts: usize,
    pub(crate) events: usize,
    pub(crate) signals: usize,
    pub(crate) batches: usize,
    /// The run's paused periods (bars of the chart's paused row).
    pub(crate) paused: usize,
}

impl Cut {
    /// How a run page or `show` reads a run: the latest `show` of each, and
    /// values of at most `value_bytes` ([`VALUE_BYTES`] unless asked).
    pub(crate) fn read(show: usize, value_bytes: usize) -> RunRead {
        RunRead::latest(show).value_bytes(value_bytes)
    }

    /// The timeline at `now` of the attempts of `view` (read with
    /// [`Cut::read`]), then the events cut to the latest `show` (the older
    /// ones the timeline needed were read beside them), the latest `show`
    /// paused periods, and the run's definition changes among the events read.
    pub(crate) fn latest(
        view: &mut RunView,
        show: usize,
        now: DateTime<Utc>,
    ) -> (Self, Vec<Segment>, Vec<DefinitionChange>) {
        let total = |n: i64| usize::try_from(n).unwrap_or(usize::MAX);
        let cut = Self {
            show,
            attempts: total(view.counts.attempts),
            events: total(view.counts.events),
            signals: total(view.counts.signals),
            batches: total(view.counts.batches),
            paused: total(view.counts.pauses),
        };
        // The read kept the latest `show` attempts, signals and batches
        // already; only the events came with older ones, for the timeline.
        let keep_last = |len: usize| len.saturating_sub(show);
        // Before the events go: the paused periods need all of them. Then
        // the latest `show` of those periods too.
        let mut segments = timeline(view, now);
        let changes = definition_changes(view);
        view.events.drain(..keep_last(view.events.len()));
        let paused = |s: &Segment| s.step_id.is_none();
        let mut drop_paused = keep_last(segments.iter().filter(|s| paused(s)).count());
        segments.retain(|s| {
            if drop_paused > 0 && paused(s) {
                drop_paused -= 1;
                false
            } else {
                true
            }
        });
        (cut, segments, changes)
    }

    /// Whether anything was left out.
    pub(crate) fn left_out(&self) -> bool {
        [
            self.attempts,
            self.events,
            self.signals,
            self.batches,
            self.paused,
        ]
        .into_iter()
        .any(|n| n > self.show)
    }
}

/// `pgbus show`: `run` as `read` bounds it (the latest `last` of each part),
/// as text or JSON; the view as printed (escaped, cut).
pub(super) async fn show_run(
    db: &Database,
    out: Output,
    run: i64,
    json: bool,
    last: usize,
    read: RunRead,
    follow: bool,
) -> Result<RunView, BoxError> {
    let mut view = db.client().run_with(RunId(run), read).await?;
    let now = db_now(db).await?;
    if !json {
        // JSON escapes what it must itself; text goes to a terminal.
        defang(&mut view);
    }
    let (cut, segments, changes) = Cut::latest(&mut view, last, now);
    if json {
        let value = serde_json::json!({
            "run": view,
            "timeline": segments,
            "definition_changes": changes,
            "counts": cut,
        });
        out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&value)?)
        ))?;
    } else {
        let mut text = show(out, &view, &segments, now);
        changes_text(&mut text, &changes);
        if cut.left_out() {
            let _ = writeln!(
                text,
                "\n(the latest {} of {} attempts, {} events, {} signals, {} batches and {} paused periods; `--last N` shows up to {})",
                cut.show,
                cut.attempts,
                cut.events,
                cut.signals,
                cut.batches,
                cut.paused,
                SHOWN_AT_MOST
            );
        }
        if follow {
            // Never through the pager: the lines that follow come after it.
            out.print(&text)?;
        } else {
            out.emit(&text)?;
        }
    }
    Ok(view)
}

/// How often `show --follow` reads the run again.
pub(super) const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The exit code of a `show --follow` that Ctrl-C stopped: 128 + SIGINT, as
/// a shell reports a command the signal ended, so a script waiting for the
/// run's end can tell it did not see one.
pub(super) const INTERRUPTED: u8 = 130;

/// `pgbus show --follow`: `run` as `show` prints it, then every
/// [`FOLLOW_EVERY`] its new events (by id) and status changes, one a line,
/// until it finishes or is cancelled (exit 0) or Ctrl-C (exit
/// [`INTERRUPTED`]). A paused run is followed on: a resume, a skip or a
/// cancel is what comes next. Each read is one statement of the command's
/// session, so the statement timeout bounds it; an error ends the command.
pub(super) async fn follow(
    db: &Database,
    out: Output,
    run: i64,
    last: usize,
    read: RunRead,
) -> Result<std::process::ExitCode, BoxError> {
    // Ctrl-C is caught from here on: the first poll installs the handler,
    // before anything says the command is following.
    let interrupted = tokio::signal::ctrl_c();
    let mut interrupted = std::pin::pin!(interrupted);
    tokio::select! {
        biased;
        caught = &mut interrupted => {
            caught?;
            return Ok(std::process::ExitCode::from(INTERRUPTED));
        }
        () = std::future::ready(()) => {}
    }
    let view = show_run(db, out, run, false, last, read, true).await?;
    let mut seen = Seen::of(&view);
    if view.run.status.is_terminal() {
        eprintln!(
            "run {run} has ended ({}): nothing to follow",
            view.run.status
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    eprintln!(
        "following run {run}: new events and status changes every {}, until it finishes or is cancelled (a paused run is followed on); Ctrl-C stops",
        took(chrono::TimeDelta::from_std(FOLLOW_EVERY).unwrap_or_default())
    );
    // Values are not printed while following: read none of them.
    let read = read.value_bytes(1);
    loop {
        tokio::select! {
            caught = &mut interrupted => {
                caught?;
                eprintln!("stopped following run {run} (Ctrl-C)");
                return Ok(std::process::ExitCode::from(INTERRUPTED));
            }
            () = tokio::time::sleep(FOLLOW_EVERY) => {}
        }
        let mut view = db.client().run_with(RunId(run), read).await?;
        defang(&mut view);
        // The database's time only for a line that says how long ago.
        let now = if view.unrunnable.is_some() && !seen.unrunnable {
            db_now(db).await?
        } else {
            view.run.updated_at
        };
        let mut text = String::new();
        seen.news(out, &view, now, &mut text);
        out.print(&text)?;
        if view.run.status.is_terminal() {
            return Ok(std::process::ExitCode::SUCCESS);
        }
    }
}

/// What `show --follow` has printed of a run so far.
struct Seen {
    status: pgbus_runtime::RunStatus,
    /// The newest event printed.
    event: i64,
    /// How many events the run had then.
    events: i64,
    unrunnable: bool,
}

impl Seen {
    fn of(view: &RunView) -> Self {
        Self {
            status: view.run.status,
            event: view.events.iter().map(|e| e.id).max().unwrap_or(0),
            events: view.counts.events,
            unrunnable: view.unrunnable.is_some(),
        }
    }

    /// The lines for what `view` has that was not printed: events newer
    /// than the last printed (a note when more came than the read holds),
    /// then the status if it changed, and a run no worker can run.
    fn news(&mut self, out: Output, view: &RunView, now: DateTime<Utc>, text: &mut String) {
        let mut new: Vec<_> = view.events.iter().filter(|e| e.id > self.event).collect();
        new.sort_by_key(|e| e.id);
        let missed = view.counts.events - self.events - i64::try_from(new.len()).unwrap_or(0);
        if missed > 0 {
            let _ = writeln!(
                text,
                "({missed} events in between not shown; `pgbus show {}` lists the latest)",
                view.run.id
            );
        }
        for event in new {
            let _ = writeln!(text, "{}", event_line(event));
        }
        if let Some(event) = view.events.iter().map(|e| e.id).max() {
            self.event = self.event.max(event);
        }
        self.events = view.counts.events;
        let run = &view.run;
        if run.status != self.status {
            let _ = writeln!(
                text,
                "{}",
                out.heading(&format!(
                    "run {}: {} -> {} at {}",
                    run.id,
                    self.status,
                    run.status,
                    time(run.updated_at)
                ))
            );
            if run.status == pgbus_runtime::RunStatus::Paused {
                if let Some(class) = &view.error_class {
                    let _ = writeln!(
                        text,
                        "error {class}: {}",
                        view.error_message.as_deref().unwrap_or_default()
                    );
                }
                let _ = writeln!(
                    text,
                    "paused: still following (`pgbus resume`, `skip` or `cancel` it to go on)"
                );
            }
            self.status = run.status;
        }
        match (&view.unrunnable, self.unrunnable) {
            (Some(unrunnable), false) => {
                let line = format!("cannot run: {}", cannot_run(unrunnable, now));
                let _ = writeln!(text, "{}", out.warning(&line));
            }
            (None, true) => {
                let _ = writeln!(text, "a live worker can run it again");
            }
            _ => {}
        }
        self.unrunnable = view.unrunnable.is_some();
    }
}

/// An event as one line: the columns of `show`'s events table.
fn event_line(event: &pgbus_runtime::view::EventView) -> String {
    let step = event.step_name.as_ref().map_or_else(
        || "-".to_owned(),
        |s| format!("{s}#{}", event.attempt.unwrap_or(0)),
    );
    let mut line = format!(
        "{}  {}  {}  {step}  {}",
        event.id,
        time(event.created_at),
        event.event,
        event.actor
    );
    if let Some(reason) = event.reason.as_deref().filter(|r| !r.is_empty()) {
        let _ = write!(line, "  {}", super::visible(reason));
    }
    line
}

/// The run's definition changes, one line each after the timeline (none:
/// nothing).
pub(super) fn changes_text(text: &mut String, changes: &[DefinitionChange]) {
    for change in changes {
        let _ = writeln!(
            text,
            "definition changed at {}: {} -> {} (claim of {}#{})",
            time(change.at),
            short_digest(&change.old_digest),
            short_digest(&change.new_digest),
            change.step.as_deref().unwrap_or("-"),
            change.attempt.unwrap_or_default()
        );
    }
}

/// The first [`SHORT_DIGEST`](super::SHORT_DIGEST) characters of `digest`.
pub(crate) fn short_digest(digest: &str) -> String {
    digest.chars().take(super::SHORT_DIGEST).collect()
}

/// The text of `pgbus show`.
fn show(out: Output, view: &RunView, segments: &[Segment], now: DateTime<Utc>) -> String {
    let mut text = header(out, view, now);
    let attempt = |id: i64| attempt_name(view, id);
    let _ = writeln!(text, "\n{}", out.heading("steps"));
    let _ = writeln!(text, "{}", render(&steps_table(out, view)));
    let _ = writeln!(text, "\n{} (as of {})", out.heading("timeline"), time(now));
    let _ = writeln!(text, "{}", render(&timeline_table(out, segments)));
    if !view.signals.is_empty() {
        let mut signals = out.table(&["id", "name", "sent", "consumed by", "payload"]);
        for signal in &view.signals {
            signals.add_row(vec![
                signal.id.0.to_string(),
                signal.name.clone(),
                time(signal.created_at),
                signal.consumed_by.map_or_else(|| "-".to_owned(), attempt),
                value_text(
                    view,
                    ValueOf::Payload {
                        signal_id: signal.id,
                    },
                    &signal.payload,
                    out.width(60),
                ),
            ]);
        }
        let _ = writeln!(text, "\n{}\n{}", out.heading("signals"), render(&signals));
    }
    if !view.batches.is_empty() {
        let mut batches = out.table(&[
            "batch",
            "started by",
            "status",
            "finished",
            "cancelled",
            "total",
            "child that cannot run",
        ]);
        for batch in &view.batches {
            batches.add_row(vec![
                batch.id.to_string(),
                attempt(batch.parent_step_id),
                batch.status.as_str().to_owned(),
                batch.finished.to_string(),
                batch.cancelled.to_string(),
                batch.total.to_string(),
                batch.unrunnable_child.map_or_else(
                    || "-".to_owned(),
                    |child| format!("run {child} (`pgbus show {child}`)"),
                ),
            ]);
        }
        let _ = writeln!(
            text,
            "\n{}\n{}",
            out.heading("fan-out batches"),
            render(&batches)
        );
    }
    let mut events = out.table(&["id", "at", "event", "step", "actor", "reason"]);
    for event in &view.events {
        events.add_row(vec![
            event.id.to_string(),
            time(event.created_at),
            event.event.clone(),
            event.step_name.as_ref().map_or_else(
                || "-".to_owned(),
                |s| format!("{s}#{}", event.attempt.unwrap_or(0)),
            ),
            event.actor.clone(),
            out.clip(event.reason.as_deref().unwrap_or_default(), 80),
        ]);
    }
    let _ = writeln!(text, "\n{}\n{}", out.heading("events"), render(&events));
    text
}

/// The run's own lines.
fn header(out: Output, view: &RunView, now: DateTime<Utc>) -> String {
    let mut text = String::new();
    let run = &view.run;
    let _ = writeln!(
        text,
        "{}  {}  {}",
        out.heading(&format!("run {}", run.id.0)),
        run.workflow,
        run.status
    );
    let _ = writeln!(
        text,
        "current step {}; created {}, updated {}{}",
        run.current_step.as_deref().unwrap_or("-"),
        time(run.created_at),
        time(run.updated_at),
        run.finished_at
            .map(|f| format!(", finished {}", time(f)))
            .unwrap_or_default()
    );
    if let Some(class) = &view.error_class {
        let _ = writeln!(
            text,
            "error {class}: {}",
            view.error_message.as_deref().unwrap_or_default()
        );
    }
    if let Some(unrunnable) = &view.unrunnable {
        let line = format!("cannot run: {}", cannot_run(unrunnable, now));
        let _ = writeln!(text, "{}", out.warning(&line));
    }
    if let Some(held) = view.held_back() {
        let _ = writeln!(
            text,
            "{}",
            out.warning(&format!("held back: {}", held_text(&held, now)))
        );
    }
    if let Some(key) = &view.idempotency_key {
        let _ = writeln!(text, "idempotency key {key}");
    }
    if let Some(key) = &view.concurrency_key {
        let _ = writeln!(text, "concurrency key {key}");
    }
    if let Some(deadline) = view.deadline_at {
        let _ = writeln!(text, "deadline {}", time(deadline));
    }
    match (view.parent_run_id, view.parent_batch_id) {
        (Some(parent), batch) => {
            let batch = batch
                .map(|b| format!(", fan-out batch {b}"))
                .unwrap_or_default();
            let _ = writeln!(text, "parent run {parent}{batch} (`pgbus show {parent}`)");
        }
        // The batch outlived its parent's row (a hand-made cleanup): say
        // what is left.
        (None, Some(batch)) => {
            let _ = writeln!(
                text,
                "child of fan-out batch {batch}, whose parent run is gone"
            );
        }
        (None, None) => {}
    }
    if let Some(children) = children_text(view) {
        let _ = writeln!(text, "{children}");
    }
    let _ = writeln!(
        text,
        "input {}",
        value_text(view, ValueOf::Input, &view.input, out.width(200))
    );
    text
}

/// Every attempt of the run.
fn steps_table(out: Output, view: &RunView) -> Table {
    let mut steps = out.table(&[
        "step", "attempt", "status", "outcome", "started", "finished", "worker", "error", "output",
    ]);
    for step in &view.steps {
        let error = step.error_class.as_ref().map_or_else(String::new, |class| {
            format!(
                "{class}: {}",
                step.error_message.as_deref().unwrap_or_default()
            )
        });
        steps.add_row(vec![
            step.step_name.clone(),
            step.attempt.to_string(),
            step.status.as_str().to_owned(),
            step.outcome.map_or("-", |o| o.as_str()).to_owned(),
            step.started_at.map_or_else(|| "-".to_owned(), time),
            step.finished_at.map_or_else(|| "-".to_owned(), time),
            step.worker_id.clone().unwrap_or_else(|| "-".to_owned()),
            out.clip(&error, 60),
            step.output.as_ref().map_or_else(
                || "-".to_owned(),
                |o| value_text(view, ValueOf::Output { step_id: step.id }, o, out.width(60)),
            ),
        ]);
    }
    steps
}

/// The attempt (`steps.id`) `id` of `view` by name, as the timeline and
/// events name it: `await_payment#1`; one older than the attempts read says
/// so instead of showing a row id.
pub(crate) fn attempt_name(view: &RunView, id: i64) -> String {
    view.steps.iter().find(|step| step.id == id).map_or_else(
        || "an older attempt".to_owned(),
        |step| format!("{}#{}", step.step_name, step.attempt),
    )
}

/// The run's fan-out children in one line: how many, in how many batches,
/// how they ended, and the command that lists them; `None` for a run that
/// never fanned out.
pub(crate) fn children_text(view: &RunView) -> Option<String> {
    if view.batches.is_empty() {
        return None;
    }
    let sum = |f: fn(&pgbus_runtime::view::BatchView) -> i32| -> i64 {
        view.batches.iter().map(|b| i64::from(f(b))).sum()
    };
    let (total, finished, cancelled) =
        (sum(|b| b.total), sum(|b| b.finished), sum(|b| b.cancelled));
    let read = i64::try_from(view.batches.len()).unwrap_or(i64::MAX);
    let batches = if view.counts.batches > read {
        format!(
            "the latest {read} of its {} fan-out batches",
            view.counts.batches
        )
    } else if read == 1 {
        "1 fan-out batch".to_owned()
    } else {
        format!("{read} fan-out batches")
    };
    Some(format!(
        "children {total} in {batches}: {finished} finished, {cancelled} cancelled, {} not ended (`pgbus runs --parent {}` lists them)",
        total - finished - cancelled,
        view.run.id
    ))
}

/// The timeline's pieces, one a line.
fn timeline_table(out: Output, segments: &[Segment]) -> Table {
    let mut pieces = out.table(&["step", "piece", "from", "to", "took", ""]);
    for segment in segments {
        let who = segment.step.as_ref().map_or_else(
            || "(run)".to_owned(),
            |step| format!("{step}#{}", segment.attempt.unwrap_or(0)),
        );
        let how = match (segment.open, segment.outcome) {
            (true, _) => "still going".to_owned(),
            (false, Some(outcome)) => outcome.as_str().to_owned(),
            (false, None) => String::new(),
        };
        pieces.add_row(vec![
            who,
            segment.piece.as_str().to_owned(),
            time(segment.from),
            time(segment.to),
            took(segment.duration()),
            how,
        ]);
    }
    pieces
}

/// What `show` and the dashboard's banner say of a run no live worker can
/// run: what is missing, which step has waited since when, and what would
/// let it go on.
/// A held-back step in words, with how long a rate window has left.
pub(crate) fn held_text(held: &HeldBack, now: DateTime<Utc>) -> String {
    match held {
        HeldBack::Rate { until, .. } if *until > now => {
            format!("{held} (in {})", took(*until - now))
        }
        _ => held.to_string(),
    }
}

pub(crate) fn cannot_run(unrunnable: &Unrunnable, now: DateTime<Utc>) -> String {
    let next = match unrunnable.missing {
        Missing::Step => {
            "it waits for a worker whose definition has the step; past the workers' \
             undefined-step grace, their sweep pauses the run with StepNotDefined"
        }
        Missing::Queue => {
            "it waits for a worker with the step that claims from its queue; nothing pauses \
             it: start one, or give the clients and workers the same queue overrides"
        }
        _ => "it waits for a worker that registers the workflow",
    };
    format!(
        "{unrunnable}; step `{}` has been due since {} ({} ago); {next}",
        unrunnable.step_name,
        time(unrunnable.since),
        took(now - unrunnable.since),
    )
}
