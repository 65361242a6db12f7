//! A run's page, and the operator actions posted from it.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use pgbus_runtime::view::{RunView, ValueOf, WaitingFor};
use pgbus_runtime::{Error, RunId, RunStatus};
use serde::Deserialize;

use super::{REFRESH_SECS, error_page, live_page, now, page, status_badge};
use crate::commands::{Cut, SHOWN, SHOWN_AT_MOST};
use crate::commands::{VALUE_BYTES, clip, took, value_text};
use crate::dashboard::form::CsrfForm;
use crate::dashboard::when::{maybe, when};
use crate::dashboard::{App, Csrf, chart};

/// What an action reported back to the run page.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Notice {
    done: Option<String>,
    error: Option<String>,
    /// How many of the latest attempts, events and signals to show.
    show: Option<usize>,
}

pub(crate) async fn run(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    Query(notice): Query<Notice>,
    Extension(csrf): Extension<Csrf>,
) -> Response {
    let show = notice.show.unwrap_or(SHOWN).clamp(1, SHOWN_AT_MOST);
    let view = match app
        .db
        .client()
        .run_with(
            RunId(id),
            Cut::read(show, VALUE_BYTES).lost_worker_threshold(app.settings.lost_worker_threshold),
        )
        .await
    {
        Ok(view) => view,
        Err(Error::RunNotFound { .. }) => {
            return error_page(StatusCode::NOT_FOUND, &format!("There is no run {id}."));
        }
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    let now = match now(&app).await {
        Ok(now) => now,
        Err(error) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &error),
    };
    // Rendering is CPU work in proportion to the run's attempts: on the
    // blocking pool, so a big run never holds up another request.
    let rendered = tokio::task::spawn_blocking(move || {
        let mut view = view;
        crate::commands::defang(&mut view);
        let (cut, segments, changes) = Cut::latest(&mut view, show, now);
        let title = format!("Run {id}");
        let body = run_body(&view, (&segments, &changes), now, &notice, &csrf, &cut);
        // An ended run no longer changes; one that has not is followed.
        if view.run.status.is_terminal() {
            page(&title, &body)
        } else {
            live_page(&title, &body, REFRESH_SECS)
        }
    })
    .await;
    match rendered {
        Ok(markup) => markup.into_response(),
        Err(error) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the page could not be drawn: {error}"),
        ),
    }
}

fn run_body(
    view: &RunView,
    (segments, changes): (
        &[pgbus_runtime::timeline::Segment],
        &[pgbus_runtime::timeline::DefinitionChange],
    ),
    now: chrono::DateTime<chrono::Utc>,
    notice: &Notice,
    csrf: &Csrf,
    cut: &Cut,
) -> Markup {
    let run = &view.run;
    let step_names: std::collections::HashMap<i64, String> = view
        .steps
        .iter()
        .map(|st| (st.id, format!("{}#{}", st.step_name, st.attempt)))
        .collect();
    let whole = Whole::new(run.id);
    html! {
        @if let Some(done) = notice.done.as_deref().filter(|d| ACTIONS.contains(d)) {
            p.notice.done { (done) ": the run is " (run.status) }
        }
        @if let Some((_, text)) = notice.error.as_deref().and_then(|e| REFUSALS.iter().find(|(code, _)| *code == e)) {
            p.notice.error { (text) }
        }
        (waits(view, now))
        dl.facts {
            dt { "Workflow" } dd { (run.workflow) }
            dt { "Status" } dd { (status_badge(run.status)) }
            dt { "Current step" } dd { (run.current_step.as_deref().unwrap_or("-")) }
            (family(view))
            dt { "Created" } dd { (when(run.created_at, now)) }
            dt { "Updated" } dd { (when(run.updated_at, now)) }
            @if let Some(finished) = run.finished_at { dt { "Finished" } dd { (when(finished, now)) } }
            @if let Some(deadline) = view.deadline_at { dt { "Deadline" } dd { (when(deadline, now)) } }
            @if let Some(class) = &view.error_class {
                dt { "Error" } dd.error { (error_text(class, view.error_message.as_deref().unwrap_or_default(), &[], &whole)) }
            }
            @if let Some(key) = &view.concurrency_key { dt { "Concurrency key" } dd { code { (key) } } }
            dt { "Input" } dd { (value(view, ValueOf::Input, &view.input, &whole)) }
        }
        (actions(run.id, run.status, csrf))
        (cut_note(cut, run.id, cut.attempts, "attempts", " in the chart and the table"))
        (cut_note(cut, run.id, cut.paused, "paused periods", " in the chart"))
        (timeline_section(segments, changes, now))
        section {
            h2 { "Steps" }
            table.steps {
                thead { tr { th { "Step" } th { "Attempt" } th { "Status" } th { "Outcome" } th { "Started" } th { "Ran" } th { "Error" } th { "Output" } } }
                tbody {
                    @for step in &view.steps {
                        tr {
                            td { (step.step_name) }
                            td { (step.attempt) }
                            td { (step.status.as_str()) }
                            td { (step.outcome.map_or("-", |o| o.as_str())) }
                            td { (maybe(step.started_at, now)) }
                            td { (step.ran().map_or_else(|| "-".to_owned(), took)) }
                            td.error {
                                @if let Some(class) = &step.error_class {
                                    (error_text(class, step.error_message.as_deref().unwrap_or_default(), &step.error_causes, &whole))
                                }
                            }
                            td {
                                @match &step.output {
                                    Some(output) => (value(view, ValueOf::Output { step_id: step.id }, output, &whole)),
                                    None => "-",
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !view.signals.is_empty() {
            section {
                h2 { "Signals" }
                (cut_note(cut, run.id, cut.signals, "signals", ""))
                table { thead { tr { th { "Id" } th { "Name" } th { "Sent" } th { "Consumed by" } th { "Payload" } } }
                    tbody { @for s in &view.signals { tr {
                        td { (s.id.0) } td { (s.name) } td { (when(s.created_at, now)) }
                        td { (s.consumed_by.map_or_else(|| "-".to_owned(), |c| {
                            step_names.get(&c).cloned().unwrap_or_else(|| c.to_string())
                        })) }
                        td { (value(view, ValueOf::Payload { signal_id: s.id }, &s.payload, &whole)) }
                    } } }
                }
            }
        }
        (batches_section(view, cut))
        section {
            h2 { "Events" }
            (cut_note(cut, run.id, cut.events, "events", ""))
            table.events {
                thead { tr { th { "At" } th { "Event" } th { "Step" } th { "Actor" } th { "Reason" } } }
                tbody {
                    @for e in &view.events {
                        tr {
                            td { (when(e.created_at, now)) }
                            td { (e.event) }
                            td { (e.step_name.as_ref().map_or_else(|| "-".to_owned(), |s| format!("{s}#{}", e.attempt.unwrap_or(0)))) }
                            td { (e.actor) }
                            td { (whole.text(e.reason.as_deref().unwrap_or_default())) }
                        }
                    }
                }
            }
        }
    }
}

/// How many characters of a value, an error or a reason a run page shows
/// before the rest goes into a `<details>`.
const PREVIEW: usize = 300;
/// The most text a run page holds whole in its `<details>`, in bytes: each
/// value is already at most [`VALUE_BYTES`] and each error message at most
/// `MAX_ERROR_MESSAGE_CHARS`, but a page of 5,000 attempts would add up.
/// Past it, a `<details>` names the command that prints the rest.
const WHOLE_BYTES: usize = 2 << 20;

/// What a run page still has room to show whole, and where the rest is.
struct Whole {
    run: RunId,
    left: std::cell::Cell<usize>,
}

impl Whole {
    fn new(run: RunId) -> Self {
        Self {
            run,
            left: std::cell::Cell::new(WHOLE_BYTES),
        }
    }

    /// Whether `bytes` more fit on the page; if so, they are taken.
    fn take(&self, bytes: usize) -> bool {
        let left = self.left.get();
        if bytes > left {
            return false;
        }
        self.left.set(left - bytes);
        true
    }

    /// What a `<details>` says when the page has shown all it may.
    fn elsewhere(&self) -> Markup {
        html! {
            p.cut { "This page shows no more in full; "
                code { "pgbus show " (self.run.0) " --json" } " prints it whole." }
        }
    }

    /// `text` (made visible already, like all a view's texts), whole if
    /// short, else its start with the whole in a `<details>`.
    fn text(&self, text: &str) -> Markup {
        if text.chars().count() <= PREVIEW {
            return html! { (text) };
        }
        html! {
            details.whole {
                summary { (clip(text, PREVIEW)) }
                @if self.take(text.len()) { pre { (text) } } @else { (self.elsewhere()) }
            }
        }
    }
}

/// A value of the run (its input, an output, a payload): on one line if
/// short, else its start with the whole, indented, in a `<details>`; one
/// the read left out for its size says so and how to read it.
fn value(view: &RunView, of: ValueOf, value: &serde_json::Value, whole: &Whole) -> Markup {
    let line = value_text(view, of, value, usize::MAX);
    if view.omitted.iter().any(|o| o.value == of) || line.chars().count() <= PREVIEW {
        return html! { code { (line) } };
    }
    let pretty = serde_json::to_string_pretty(value).unwrap_or(line.clone());
    html! {
        details.whole {
            summary { code { (clip(&line, PREVIEW)) } }
            @if whole.take(pretty.len()) {
                pre { (crate::commands::json_visible(&pretty)) }
            } @else {
                (whole.elsewhere())
            }
        }
    }
}

/// An error: its class and message, the message's start if long, and the
/// whole message with its causes (nearest first) in a `<details>`, saying
/// where the engine cut what it stored.
fn error_text(class: &str, message: &str, causes: &[String], whole: &Whole) -> Markup {
    use pgbus_runtime::error::{MAX_ERROR_CAUSES, MAX_ERROR_MESSAGE_CHARS};
    let long = message.chars().count() > PREVIEW;
    // The engine cuts a longer message to this many characters, ending in `…`.
    let cut = message.chars().count() >= MAX_ERROR_MESSAGE_CHARS && message.ends_with('…');
    if !long && causes.is_empty() {
        return html! { (class) ": " (message) };
    }
    let bytes = message.len() + causes.iter().map(String::len).sum::<usize>();
    html! {
        details.whole {
            summary { (class) ": " (clip(message, PREVIEW)) }
            @if whole.take(bytes) {
                @if long { pre { (message) } }
                @if cut { p.cut { "Stored cut to " (MAX_ERROR_MESSAGE_CHARS) " characters." } }
                @if !causes.is_empty() {
                    p { "Caused by:" }
                    ol.causes { @for cause in causes { li { (cause) } } }
                    @if causes.len() >= MAX_ERROR_CAUSES {
                        p.cut { "At most " (MAX_ERROR_CAUSES) " causes are stored." }
                    }
                }
            } @else {
                (whole.elsewhere())
            }
        }
    }
}

/// What the run waits for, in words with relative times: no live worker
/// has its step, a flow limit holds it back, a signal, its batch, a step's
/// `wait` or a reattempt's backoff (see [`RunView::waiting_for`]).
fn waits(view: &RunView, now: chrono::DateTime<chrono::Utc>) -> Markup {
    html! {
        @match view.waiting_for(now) {
            Some(WaitingFor::Worker(unrunnable)) => {
                p.banner.stuck role="alert" {
                    strong { "Cannot run: " }
                    (crate::commands::cannot_run(&unrunnable, now))
                    " (" a href="/workers" { "live workers" } ")"
                }
            }
            Some(WaitingFor::Limit(held)) => {
                p.banner.held role="status" {
                    strong { "Held back: " }
                    (crate::commands::held_text(&held, now))
                }
            }
            Some(waiting) => {
                p.banner.waits role="status" { strong { "Waiting: " } (waiting_text(&waiting, view.run.id, now)) }
            }
            None => {}
        }
    }
}

/// A wait other than a worker or a limit, as a sentence.
fn waiting_text(waiting: &WaitingFor, run: RunId, now: chrono::DateTime<chrono::Utc>) -> Markup {
    let visible = crate::commands::visible;
    html! {
        @match waiting {
            WaitingFor::Signal { step_name, name, since, timeout_at, .. } => {
                "step " code { (visible(step_name)) } " waits for signal " code { (visible(name)) }
                ", since " (when(*since, now)) "; "
                @match timeout_at {
                    Some(at) if *at <= now => { "its wait timed out " (when(*at, now)) ", and the sweep acts on that next." }
                    Some(at) => { "it times out " (when(*at, now)) "." }
                    None => { "it has no timeout." }
                }
            }
            WaitingFor::Batch { step_name, batch_id, finished, cancelled, total, .. } => {
                "step " code { (visible(step_name)) } " waits for "
                @if let Some(batch) = batch_id {
                    "its batch " (batch) ": " (finished) " of " (total) " children finished"
                    @if *cancelled > 0 { ", " (cancelled) " cancelled" }
                } @else {
                    "its batch of children"
                }
                " (" a href=(super::runs::children_link(run)) { "the children" } ")."
            }
            WaitingFor::Time { step_name, until, .. } => {
                "step " code { (visible(step_name)) } " is due " (when(*until, now))
                " (its wait after the step before, or the start's delay)."
            }
            WaitingFor::Backoff { step_name, attempt, until, .. } => {
                "attempt " (attempt) " of step " code { (visible(step_name)) }
                " waits out its backoff; it is due " (when(*until, now)) "."
            }
            other => { (other.to_string()) }
        }
    }
}

/// A run's place in a fan-out tree: the run whose batch started it (which
/// batch, of which step), and its own children, a link to their list.
fn family(view: &RunView) -> Markup {
    html! {
        @if let Some(parent) = view.parent_run_id {
            dt { "Parent" }
            dd.parent {
                "child of " a href=(format!("/runs/{}", parent.0)) { "run " (parent.0) }
                @if let Some(batch) = view.parent_batch_id {
                    " (batch " (batch)
                    @if let Some(step) = &view.parent_step { " of step " code { (crate::commands::visible(step)) } }
                    ")"
                }
            }
        }
        @if view.run.children > 0 {
            dt { "Children" }
            dd.children {
                a href=(super::runs::children_link(view.run.id)) {
                    (view.run.children) " child run" @if view.run.children != 1 { "s" }
                }
            }
        }
    }
}

/// The fan-out batches of a run's page, each with a child no live worker
/// can run, if one is stuck so.
fn batches_section(view: &RunView, cut: &Cut) -> Markup {
    html! {
        @if !view.batches.is_empty() {
            section {
                h2 { "Fan-out batches" }
                (cut_note(cut, view.run.id, cut.batches, "batches", ""))
                table { thead { tr { th { "Id" } th { "Status" } th { "Finished" } th { "Cancelled" } th { "Total" } th { "Child that cannot run" } } }
                    tbody { @for b in &view.batches { tr {
                        td { (b.id) } td { (b.status.as_str()) } td { (b.finished) } td { (b.cancelled) } td { (b.total) }
                        td.stuck { @match b.unrunnable_child {
                            Some(child) => { a href=(format!("/runs/{}", child.0)) { "run " (child.0) } " waits for a worker that can run it" }
                            None => { "-" }
                        } }
                    } } }
                }
            }
        }
    }
}

/// "Showing the latest N of `total` `what`", with a link to more while the
/// cap allows; nothing when all `total` are shown.
fn cut_note(cut: &Cut, run: RunId, total: usize, what: &str, place: &str) -> Markup {
    html! {
        @if total > cut.show {
            p.cut {
                "Showing the latest " (cut.show) " of " (total) " " (what) (place) ". "
                @if cut.show < SHOWN_AT_MOST {
                    a href=(format!("/runs/{}?show={}", run.0, (cut.show * 5).min(SHOWN_AT_MOST))) {
                        "Show more"
                    }
                }
            }
        }
    }
}

/// The actions a run in `status` may take (the engine still decides).
fn allowed_actions(status: RunStatus) -> Vec<(&'static str, &'static str)> {
    match status {
        RunStatus::Ready | RunStatus::Performing => vec![("pause", "Pause"), ("cancel", "Cancel")],
        RunStatus::Paused => vec![
            ("resume", "Resume"),
            ("skip", "Skip step"),
            ("cancel", "Cancel"),
        ],
        RunStatus::Finished | RunStatus::Cancelled => Vec::new(),
    }
}

/// The action forms of a run's page.
fn actions(run: RunId, status: RunStatus, csrf: &Csrf) -> Markup {
    html! {
        section.actions {
            h2 { "Act" }
            @if allowed_actions(status).is_empty() { p.empty { "Nothing to do: the run has ended." } }
            @for (action, label) in allowed_actions(status) {
                form method="post" action=(format!("/runs/{}/{action}", run.0)) class=(format!("act {action}")) {
                    input type="hidden" name="csrf" value=(csrf.0);
                    input name="actor" placeholder="your name" required maxlength="200";
                    input name="reason" placeholder="why" required maxlength="10000";
                    button type="submit" name="do" value=(action) { (label) }
                }
            }
        }
    }
}

/// The timeline section of a run's page: a legend and the chart.
fn timeline_section(
    segments: &[pgbus_runtime::timeline::Segment],
    changes: &[pgbus_runtime::timeline::DefinitionChange],
    now: chrono::DateTime<chrono::Utc>,
) -> Markup {
    html! {
        section {
            h2 { "Timeline" }
            p.legend {
                @for piece in ["waited", "queued", "ran", "waiting", "paused"] {
                    span class=(format!("key {piece}")) { (piece) }
                }
                " ran, by how the attempt ended: "
                @for (class, label) in [("ok", "completed"), ("reattempted", "reattempted"), ("bad", "paused or cancelled"), ("skipped", "skipped")] {
                    span class=(format!("key {class}")) { (label) }
                }
            }
            (chart::timeline(segments, now))
            @if !changes.is_empty() {
                ul.definition-changes {
                    @for change in changes {
                        li {
                            "Definition changed at " (when(change.at, now)) ": "
                            code title=(change.old_digest) { (crate::commands::short_digest(&change.old_digest)) }
                            " → "
                            code title=(change.new_digest) { (crate::commands::short_digest(&change.new_digest)) }
                            " (claim of " (change.step.as_deref().unwrap_or("-")) "#" (change.attempt.unwrap_or_default()) ")"
                        }
                    }
                }
            }
        }
    }
}

/// An action form (its CSRF token checked by [`CsrfForm`]).
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    actor: String,
    reason: String,
}

pub(crate) async fn act(
    State(app): State<Arc<App>>,
    Path((id, action)): Path<(i64, String)>,
    CsrfForm(form): CsrfForm<ActionForm>,
) -> Response {
    let actor = format!("dashboard:{}", form.actor.trim());
    let reason = form.reason.trim();
    let client = app.db.client();
    let run = RunId(id);
    if !ACTIONS.contains(&action.as_str()) {
        return error_page(StatusCode::NOT_FOUND, &format!("No action `{action}`."));
    }
    let result = match action.as_str() {
        _ if form.actor.trim().is_empty() => Err("actor"),
        _ if pgbus_runtime::client::check_reason(reason).is_err() => Err("reason"),
        "pause" => client
            .pause(run, &actor, reason)
            .await
            .map_err(|e| code_of(&e)),
        "resume" => client
            .resume(run, &actor, reason)
            .await
            .map_err(|e| code_of(&e)),
        "cancel" => client
            .cancel(run, &actor, reason)
            .await
            .map_err(|e| code_of(&e)),
        _ => client
            .skip(run, &actor, reason)
            .await
            .map_err(|e| code_of(&e)),
    };
    // The notice travels as a word the run page knows, never as text: a
    // link cannot make the page say what its author likes.
    let to = match result {
        Ok(_) => format!("/runs/{id}?done={action}"),
        Err(code) => format!("/runs/{id}?error={code}"),
    };
    Redirect::to(&to).into_response()
}

/// The operator actions, as their forms post them.
pub(crate) const ACTIONS: [&str; 4] = ["pause", "resume", "cancel", "skip"];

/// What a refused or failed action says on the run page, by its code.
pub(super) const REFUSALS: [(&str, &str); 9] = [
    ("actor", "Say who you are."),
    ("reason", "Say why, in at most 10,000 characters."),
    ("already-paused", "The run is already paused."),
    ("not-paused", "The run is not paused."),
    ("ended", "The run has ended."),
    (
        "step-running",
        "Its step is still running: wait for it to end, or cancel the run.",
    ),
    (
        "nothing-to-skip",
        "Nothing to skip: the step completed and paused the run; resume to run the next step.",
    ),
    (
        "no-plan",
        "The run's recorded step plan does not say which step follows.",
    ),
    (
        "failed",
        "The action failed: the database did not take it. Look at the run before trying it again.",
    ),
];

/// The code of an action's error.
pub(super) fn code_of(error: &Error) -> &'static str {
    use pgbus_runtime::IllegalMove;
    match error {
        Error::IllegalMove { why, .. } => match why {
            IllegalMove::AlreadyPaused => "already-paused",
            IllegalMove::NotPaused { .. } => "not-paused",
            IllegalMove::Ended { .. } => "ended",
            IllegalMove::StepRunning { .. } => "step-running",
            IllegalMove::NothingToSkip { .. } => "nothing-to-skip",
            _ => "no-plan",
        },
        _ => "failed",
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;
    use pgbus_runtime::timeline::DefinitionChange;

    #[test]
    fn a_long_error_shows_its_start_and_the_whole_with_its_causes_on_demand() {
        let whole = super::Whole::new(pgbus_runtime::RunId(7));
        let short = super::error_text("Boom", "short <b>", &[], &whole).into_string();
        assert_eq!(short, "Boom: short &lt;b&gt;", "no details when all shows");
        let long = format!("{}{}", "a".repeat(400), "<end>");
        let causes = vec!["the <cause>".to_owned()];
        let html = super::error_text("Boom", &long, &causes, &whole).into_string();
        assert!(
            html.starts_with(r#"<details class="whole"><summary>Boom: aaa"#),
            "{html}"
        );
        assert!(
            html.contains(&format!("{}…</summary>", "a".repeat(299))),
            "{html}"
        );
        assert!(html.contains("&lt;end&gt;</pre>"), "the whole: {html}");
        assert!(
            html.contains(r#"<ol class="causes"><li>the &lt;cause&gt;</li></ol>"#),
            "{html}"
        );
        assert!(!html.contains("Stored cut"), "{html}");
        // A short message with causes: the causes, on demand.
        let html = super::error_text("Boom", "short", &causes, &whole).into_string();
        assert!(
            html.contains("<summary>Boom: short</summary>") && !html.contains("<pre>"),
            "{html}"
        );
        // A message the engine cut, and as many causes as it keeps: said.
        let cut = format!(
            "{}…",
            "c".repeat(pgbus_runtime::error::MAX_ERROR_MESSAGE_CHARS - 1)
        );
        let five = vec!["x".to_owned(); pgbus_runtime::error::MAX_ERROR_CAUSES];
        let html = super::error_text("Boom", &cut, &five, &whole).into_string();
        assert!(html.contains("Stored cut to 10000 characters."), "{html}");
        assert!(html.contains("At most 5 causes are stored."), "{html}");
    }

    #[test]
    fn a_page_holds_whole_texts_up_to_its_budget_then_names_the_command() {
        let whole = super::Whole::new(pgbus_runtime::RunId(7));
        let text = "r".repeat(super::WHOLE_BYTES / 2);
        for _ in 0..2 {
            assert!(whole.text(&text).into_string().contains("<pre>"));
        }
        let over = whole.text(&text).into_string();
        assert!(!over.contains("<pre>"), "past the budget");
        assert!(
            over.contains("<code>pgbus show 7 --json</code> prints it whole."),
            "{over}"
        );
        // A short text still shows: it needs no room of the budget.
        assert_eq!(whole.text("why").into_string(), "why");
    }

    #[test]
    fn the_timeline_lists_the_runs_definition_changes_and_escapes_them() {
        let at = chrono::Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let none = super::timeline_section(&[], &[], at).into_string();
        assert!(!none.contains("definition-changes"), "no change, no list");
        let change = DefinitionChange {
            at,
            step: Some("<b>ship</b>".to_owned()),
            attempt: Some(2),
            old_digest: "0123456789abcdef0123".to_owned(),
            new_digest: "fedcba9876543210fedc".to_owned(),
        };
        let html = super::timeline_section(&[], &[change], at).into_string();
        assert!(
            html.contains(r#"<ul class="definition-changes">"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<code title="0123456789abcdef0123">0123456789ab</code>"#),
            "{html}"
        );
        assert!(html.contains("&lt;b&gt;ship&lt;/b&gt;#2"), "{html}");
    }

    #[test]
    fn a_wait_reads_as_a_sentence_with_relative_times() {
        use pgbus_runtime::view::WaitingFor;
        let now = chrono::Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let run = pgbus_runtime::RunId(7);
        let signal = WaitingFor::Signal {
            step_id: 1,
            step_name: "ship".to_owned(),
            name: "payment.<settled>".to_owned(),
            since: now - chrono::TimeDelta::minutes(30),
            timeout_at: Some(now + chrono::TimeDelta::minutes(90)),
        };
        let html = super::waiting_text(&signal, run, now).into_string();
        assert!(
            html.starts_with(
                "step <code>ship</code> waits for signal <code>payment.&lt;settled&gt;</code>, since <time"
            ),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="ago">30 min ago</span>; it times out <time"#),
            "{html}"
        );
        assert!(
            html.ends_with(r#"<span class="ago">in 1 h</span>."#),
            "{html}"
        );
        let late = WaitingFor::Signal {
            step_id: 1,
            step_name: "ship".to_owned(),
            name: "paid".to_owned(),
            since: now - chrono::TimeDelta::hours(3),
            timeout_at: None,
        };
        let html = super::waiting_text(&late, run, now).into_string();
        assert!(html.ends_with("; it has no timeout."), "{html}");

        let batch = WaitingFor::Batch {
            step_id: 2,
            step_name: "notify".to_owned(),
            batch_id: Some(4),
            finished: 3,
            cancelled: 1,
            total: 10,
            since: None,
        };
        let html = super::waiting_text(&batch, run, now).into_string();
        assert_eq!(
            html,
            r#"step <code>notify</code> waits for its batch 4: 3 of 10 children finished, 1 cancelled (<a href="/runs?parent=7">the children</a>)."#
        );
    }
}
