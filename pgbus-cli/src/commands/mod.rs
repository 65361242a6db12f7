//! What each subcommand does.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use comfy_table::{Cell, Table};
use pgbus_runtime::timeline::{Segment, timeline};
use pgbus_runtime::view::{RunFilter, RunRead, RunView, ValueOf};
use pgbus_runtime::{Clock, Database, RunId, Schema, StallAction};
use serde_json::Value;

use crate::output::Output;
use crate::{Action, Cli, Command, Retention, RunsArgs};

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
    /// ones the timeline needed were read beside them), and the latest
    /// `show` paused periods.
    pub(crate) fn latest(
        view: &mut RunView,
        show: usize,
        now: DateTime<Utc>,
    ) -> (Self, Vec<Segment>) {
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
        (cut, segments)
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

/// The statement timeout of every command but `migrate`, unless one is given:
/// below the dashboard's 15 s page timeout, so the server has cancelled a
/// page's query before the page gives up on it.
const DEFAULT_STATEMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the command line's command; its error, with a hint where one helps.
pub(crate) async fn run(cli: Cli) -> Result<(), BoxError> {
    let schema = cli.schema.clone();
    let url = cli.database_url.clone();
    execute(cli)
        .await
        .map_err(|error| hint(error, &url, &schema))
}

/// `error` with what an operator would ask next: which server, or whether
/// the schema was migrated.
fn hint(error: BoxError, url: &str, schema: &str) -> BoxError {
    let text = chain(error.as_ref());
    if text.contains("relation \"") && text.contains("does not exist") {
        // The runtime's own hint names no schema; this one does.
        let text = text.replace(
            "; is the schema migrated? run `Database::migrate` (or `pgbus migrate`)",
            "",
        );
        format!("{text} (is schema {schema} migrated? run `pgbus migrate`)").into()
    } else if text.contains("could not get a database connection") {
        // Through pgbus's own parser, so URLs with libpq's TLS settings
        // (which tokio-postgres alone refuses) still say where they point.
        let at = pgbus_runtime::connection::servers(url)
            .ok()
            .filter(|servers| !servers.is_empty())
            .map(|servers| format!(" (server {})", servers.join(",")))
            .unwrap_or_default();
        format!("{text}{at}").into()
    } else if text.contains("lock timeout") {
        format!(
            "{text} (another session holds a lock this command needs; `--lock-timeout` waits longer)"
        )
        .into()
    } else if text.contains("statement timeout") {
        format!("{text} (`--statement-timeout` allows longer)").into()
    } else {
        error
    }
}

/// An error and its causes on one line.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line.replace('\n', " ")
}

/// The database's time: what stored times are on, whatever the host's clock
/// says. Sent unnamed, so it also works behind a transaction-mode pooler.
pub(crate) async fn db_now(db: &Database) -> Result<DateTime<Utc>, BoxError> {
    let client = db.pool().get().await?;
    Ok(client
        .query_typed_one("SELECT clock_timestamp()", &[])
        .await?
        .get(0))
}

/// The access token in the first line of `path`, by the flag's rule.
fn token_from_file(path: &std::path::Path) -> Result<String, BoxError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let first = text.lines().next().unwrap_or_default().trim();
    if first.is_empty() {
        // An empty token means none, which would turn the guard off.
        return Err(format!(
            "the token file {} holds no token on its first line",
            path.display()
        )
        .into());
    }
    Ok(crate::parse_token(first).map_err(|e| format!("{}: {e}", path.display()))?)
}

/// The database, with the command's timeouts.
async fn connect(cli: &Cli) -> Result<Database, BoxError> {
    let schema = Schema::new(&cli.schema)?;
    let builder = Database::builder(&cli.database_url)
        .schema(schema)
        .clock(Clock::Database);
    let db = if cli.transaction_pooler {
        builder.transaction_pooler(true).connect().await?
    } else {
        // No command waits on a lock or a slow query without end: the server
        // cancels it, and the command says so in one line.
        let statement_timeout = match &cli.command {
            Command::Migrate => cli.statement_timeout,
            _ => Some(cli.statement_timeout.unwrap_or(DEFAULT_STATEMENT_TIMEOUT)),
        };
        // Migrations wait for each other's advisory lock, as they should:
        // `migrate` runs from many places at once.
        let builder = if matches!(cli.command, Command::Migrate) {
            builder
        } else {
            builder.lock_timeout(cli.lock_timeout)
        };
        match statement_timeout {
            Some(timeout) => builder.statement_timeout(timeout),
            None => builder,
        }
        .connect()
        .await?
    };
    Ok(db)
}

async fn execute(cli: Cli) -> Result<(), BoxError> {
    let db = connect(&cli).await?;
    let out = Output::detect();
    match cli.command {
        Command::Migrate => {
            db.migrate().await?;
            out.line(&format!("schema {} is up to date", db.schema()))?;
        }
        Command::Runs(args) => runs(&db, out, args).await?,
        Command::Show {
            run,
            json,
            last,
            value_bytes,
        } => show_run(&db, out, run, json, last, value_bytes).await?,
        Command::Pause(action) => act(&db, out, &action, Verb::Pause).await?,
        Command::Resume(action) => act(&db, out, &action, Verb::Resume).await?,
        Command::Cancel(action) => act(&db, out, &action, Verb::Cancel).await?,
        Command::Skip(action) => act(&db, out, &action, Verb::Skip).await?,
        Command::Signal {
            run,
            name,
            payload,
            payload_file,
        } => {
            let payload = match (payload, payload_file) {
                (_, Some(path)) => Some(read_payload(&path)?),
                (payload, None) => payload,
            };
            signal(&db, out, run, &name, payload).await?;
        }
        Command::Sweep {
            stall_action,
            lost_worker_threshold,
            retention,
        } => {
            let retention = retention.and_then(|r| r.0);
            sweep(&db, out, &stall_action, lost_worker_threshold, retention).await?;
        }
        Command::Dashboard {
            bind,
            token,
            token_file,
            no_token,
            public_origin,
            retention,
        } => {
            // An empty token (`PGBUS_DASHBOARD_TOKEN=`) is none given.
            let token = token.filter(|t| !t.is_empty());
            let token = match (token_file, token) {
                (Some(path), _) => crate::dashboard::Token::Given(token_from_file(&path)?),
                (None, Some(token)) => crate::dashboard::Token::Given(token),
                (None, None) if no_token => crate::dashboard::Token::None,
                (None, None) => crate::dashboard::Token::made(),
            };
            let settings = crate::dashboard::Settings {
                bind,
                token,
                retention: retention.0,
                public_origin,
            };
            crate::dashboard::serve(db, settings).await?;
        }
        Command::Stats {
            window,
            retention,
            json,
        } => stats(&db, out, window, retention, json).await?,
    }
    Ok(())
}

/// `pgbus show`: the latest `last` of each part of `run`, values of at most
/// `value_bytes`, as text or JSON.
async fn show_run(
    db: &Database,
    out: Output,
    run: i64,
    json: bool,
    last: usize,
    value_bytes: usize,
) -> Result<(), BoxError> {
    let mut view = db
        .client()
        .run_with(RunId(run), Cut::read(last, value_bytes))
        .await?;
    let now = db_now(db).await?;
    if !json {
        // JSON escapes what it must itself; text goes to a terminal.
        defang(&mut view);
    }
    let (cut, segments) = Cut::latest(&mut view, last, now);
    if json {
        let value = serde_json::json!({ "run": view, "timeline": segments, "counts": cut });
        out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(&value)?)
        ))?;
    } else {
        let mut text = show(out, &view, &segments, now);
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
        out.emit(&text)?;
    }
    Ok(())
}

async fn runs(db: &Database, out: Output, args: RunsArgs) -> Result<(), BoxError> {
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

/// A payload from `path`, or from standard input for `-`.
fn read_payload(path: &std::path::Path) -> Result<String, BoxError> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    text.map_err(|e| format!("--payload-file {}: {e}", path.display()).into())
}

async fn signal(
    db: &Database,
    out: Output,
    run: i64,
    name: &str,
    payload: Option<String>,
) -> Result<(), BoxError> {
    let payload: serde_json::Value = match payload {
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| format!("--payload is not JSON: {e}"))?
        }
        None => serde_json::Value::Null,
    };
    let id = db.client().signal(RunId(run), name, &payload).await?;
    out.line(&format!("signal {} `{name}` sent to run {run}", id.0))?;
    Ok(())
}

async fn sweep(
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
         deleted {} runs past retention, removed {} silent worker rows",
        report.repaired,
        report.left_alone,
        report.batches_resolved,
        report.runs_deleted,
        report.workers_removed
    ))?;
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Verb {
    Pause,
    Resume,
    Cancel,
    Skip,
}

async fn act(db: &Database, out: Output, action: &Action, verb: Verb) -> Result<(), BoxError> {
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
fn default_actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.trim().is_empty())
        .map_or_else(|| "cli".to_owned(), |user| format!("cli:{}", user.trim()))
}

async fn stats(
    db: &Database,
    out: Output,
    window: pgbus_runtime::window::Window,
    retention: Retention,
    json: bool,
) -> Result<(), BoxError> {
    let range = window.at(db_now(db).await?, retention.0);
    let counts = db.client().run_counts(&range).await?;
    if json {
        let value = serde_json::json!({ "range": range, "buckets": counts });
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
    if range.capped {
        let kept = pgbus_core::format_duration_ms(
            u64::try_from(retention.0.unwrap_or_default().as_millis()).unwrap_or(u64::MAX),
        );
        writeln!(
            text,
            "cut to {kept}, the retention age: ended runs last changed before then are deleted, so older buckets would undercount"
        )?;
    }
    let mut table = out.table(&["bucket", "started", "finished", "paused", "cancelled"]);
    let mut totals = [0_i64; 4];
    for b in &counts {
        let row = [b.started, b.finished, b.paused, b.cancelled];
        for (total, n) in totals.iter_mut().zip(row) {
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
    writeln!(text, "{}", render(&table))?;
    out.emit(&text)?;
    Ok(())
}

/// The text of `pgbus show`.
fn show(out: Output, view: &RunView, segments: &[Segment], now: DateTime<Utc>) -> String {
    let mut text = header(out, view);
    let _ = writeln!(text, "\n{}", out.heading("steps"));
    let _ = writeln!(text, "{}", render(&steps_table(out, view)));
    let _ = writeln!(text, "\n{} (as of {})", out.heading("timeline"), time(now));
    let _ = writeln!(text, "{}", render(&timeline_table(out, segments)));
    if !view.signals.is_empty() {
        let mut signals = out.table(&["id", "name", "sent", "consumed by step", "payload"]);
        for signal in &view.signals {
            signals.add_row(vec![
                signal.id.0.to_string(),
                signal.name.clone(),
                time(signal.created_at),
                signal
                    .consumed_by
                    .map_or_else(|| "-".to_owned(), |id| id.to_string()),
                value_text(
                    view,
                    ValueOf::Payload {
                        signal_id: signal.id,
                    },
                    &signal.payload,
                    60,
                ),
            ]);
        }
        let _ = writeln!(text, "\n{}\n{}", out.heading("signals"), render(&signals));
    }
    if !view.batches.is_empty() {
        let mut batches = out.table(&["id", "step", "status", "finished", "cancelled", "total"]);
        for batch in &view.batches {
            batches.add_row(vec![
                batch.id.to_string(),
                batch.parent_step_id.to_string(),
                batch.status.clone(),
                batch.finished.to_string(),
                batch.cancelled.to_string(),
                batch.total.to_string(),
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
            clip(event.reason.as_deref().unwrap_or_default(), 80),
        ]);
    }
    let _ = writeln!(text, "\n{}\n{}", out.heading("events"), render(&events));
    text
}

/// The run's own lines.
fn header(out: Output, view: &RunView) -> String {
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
    if let Some(key) = &view.idempotency_key {
        let _ = writeln!(text, "idempotency key {key}");
    }
    if let Some(batch) = view.parent_batch_id {
        let _ = writeln!(text, "child of fan-out batch {batch}");
    }
    let _ = writeln!(
        text,
        "input {}",
        value_text(view, ValueOf::Input, &view.input, 200)
    );
    text
}

/// Every attempt of the run.
fn steps_table(out: Output, view: &RunView) -> Table {
    let mut steps = out.table(&[
        "id", "step", "attempt", "status", "outcome", "started", "finished", "worker", "error",
        "output",
    ]);
    for step in &view.steps {
        let error = step.error_class.as_ref().map_or_else(String::new, |class| {
            format!(
                "{class}: {}",
                step.error_message.as_deref().unwrap_or_default()
            )
        });
        steps.add_row(vec![
            step.id.to_string(),
            step.step_name.clone(),
            step.attempt.to_string(),
            step.status.as_str().to_owned(),
            step.outcome.map_or("-", |o| o.as_str()).to_owned(),
            step.started_at.map_or_else(|| "-".to_owned(), time),
            step.finished_at.map_or_else(|| "-".to_owned(), time),
            step.worker_id.clone().unwrap_or_else(|| "-".to_owned()),
            clip(&error, 60),
            step.output.as_ref().map_or_else(
                || "-".to_owned(),
                |o| value_text(view, ValueOf::Output { step_id: step.id }, o, 60),
            ),
        ]);
    }
    steps
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

/// A table's text without the padding at the end of its lines.
fn render(table: &Table) -> String {
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A time as operators read it: UTC, to the millisecond.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A duration in the option grammar's units (`1m30s`, `250ms`).
pub(crate) fn took(duration: chrono::Duration) -> String {
    let ms = u64::try_from(duration.num_milliseconds()).unwrap_or(0);
    if ms == 0 {
        "<1ms".to_owned()
    } else {
        pgbus_core::format_duration_ms(ms)
    }
}

/// `text` on one line, cut to `max` characters with an ellipsis.
/// A value of `view`, clipped to `max` characters, or, where the read left
/// it out for its length, that length and how to read it.
pub(crate) fn value_text(view: &RunView, of: ValueOf, value: &Value, max: usize) -> String {
    match view.omitted.iter().find(|omitted| omitted.value == of) {
        Some(omitted) => format!(
            "({} bytes, left out: `pgbus show {} --json --value-bytes {}`)",
            omitted.bytes, view.run.id, omitted.bytes
        ),
        None => clip(&value.to_string(), max),
    }
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line = visible(text);
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// `text` with every character that a terminal or a log would act on, or
/// that would hide or reorder text, written as a visible escape: control
/// characters (C0 with line breaks and `ESC`, `DEL`, C1) and invisible
/// formatting characters (zero-width, direction overrides and isolates, the
/// byte-order mark, soft hyphens: `pgbus_core::is_invisible`), as `\u{1b}`,
/// `\u{202e}` and so on. What a run holds reaches a terminal, a pager or the
/// page only through this, so a step's error message cannot move the cursor,
/// forge a line or make two keys look alike.
pub(crate) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `c` acts on a terminal, breaks a line, or shows as nothing or
/// reorders what is around it: controls (C0, `DEL`, C1),
/// `pgbus_core::is_invisible`, and the other format, separator and
/// default-ignorable characters that render blank (the Arabic letter mark,
/// line and paragraph separators, the Mongolian vowel separator, the
/// combining grapheme joiner, Hangul fillers, variation selectors, tags).
pub(crate) fn hidden(c: char) -> bool {
    c.is_control()
        || pgbus_core::is_invisible(c)
        || matches!(
            c,
            '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{180e}'
                | '\u{034f}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{3164}'
                | '\u{ffa0}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// JSON text with every [`hidden`] character inside its strings written as a
/// `\uXXXX` escape (a surrogate pair above the BMP): the same JSON value,
/// safe on a terminal. Structural JSON never holds such a character, so
/// only strings change.
pub(crate) fn json_visible(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // JSON itself escapes C0 controls inside strings, and its own line
        // breaks and indents are ASCII: only the rest is ours.
        if !c.is_ascii() && hidden(c) {
            let mut units = [0_u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every text of `view` that came from a workflow, a step or an operator,
/// made [`visible`]: what the text listings print.
pub(crate) fn defang(view: &mut RunView) {
    fn all(text: &mut String) {
        if text.chars().any(hidden) {
            *text = visible(text);
        }
    }
    fn some(text: &mut Option<String>) {
        if let Some(text) = text {
            all(text);
        }
    }
    all(&mut view.run.workflow);
    some(&mut view.run.current_step);
    some(&mut view.error_class);
    some(&mut view.error_message);
    some(&mut view.idempotency_key);
    for step in &mut view.steps {
        all(&mut step.step_name);
        all(&mut step.queue);
        some(&mut step.worker_id);
        some(&mut step.error_class);
        some(&mut step.error_message);
        some(&mut step.waiting_for);
        step.error_causes.iter_mut().for_each(all);
    }
    for event in &mut view.events {
        all(&mut event.event);
        all(&mut event.actor);
        some(&mut event.step_name);
        some(&mut event.reason);
    }
    for signal in &mut view.signals {
        all(&mut signal.name);
    }
    for batch in &mut view.batches {
        all(&mut batch.status);
    }
}

fn delta(duration: std::time::Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(duration).unwrap_or(chrono::TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_escapes_what_acts_on_a_terminal_or_hides() {
        for c in [
            '\u{1b}',
            '\r',
            '\n',
            '\u{7f}',
            '\u{9b}',
            '\u{202e}',
            '\u{2066}',
            '\u{200b}',
            '\u{feff}',
            '\u{061c}',
            '\u{2028}',
            '\u{2029}',
            '\u{180e}',
            '\u{034f}',
            '\u{3164}',
            '\u{fe0f}',
            '\u{e0041}',
        ] {
            let shown = visible(&format!("a{c}b"));
            assert!(!shown.contains(c), "{c:?}: {shown}");
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)));
        }
        assert_eq!(visible("Zoë — 注文 #7"), "Zoë — 注文 #7");
    }

    #[test]
    fn json_visible_keeps_the_value_and_hides_nothing() {
        let value = serde_json::json!({
            "note": "a\u{9b}31m\u{202e}b\u{200b}c\u{e0041}d",
            "plain": "Zoë",
        });
        let text = json_visible(&serde_json::to_string_pretty(&value).unwrap_or_default());
        assert!(!text.chars().any(|c| !c.is_ascii() && hidden(c)), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, value);
    }
}
