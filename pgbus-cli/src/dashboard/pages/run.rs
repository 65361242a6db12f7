//! A run's page, and the operator actions posted from it.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use pgbus_runtime::view::{RunView, ValueOf};
use pgbus_runtime::{Error, RunId, RunStatus};
use serde::Deserialize;

use super::{REFRESH_SECS, error_page, live_page, now, page, status_badge};
use crate::commands::{Cut, SHOWN, SHOWN_AT_MOST};
use crate::commands::{VALUE_BYTES, clip, time, took, value_text};
use crate::dashboard::{App, Csrf, chart, same};

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
            dt { "Created" } dd { (time(run.created_at)) }
            dt { "Updated" } dd { (time(run.updated_at)) }
            @if let Some(finished) = run.finished_at { dt { "Finished" } dd { (time(finished)) } }
            @if let Some(deadline) = view.deadline_at { dt { "Deadline" } dd { (time(deadline)) } }
            @if let Some(class) = &view.error_class {
                dt { "Error" } dd.error { (class) ": " (clip(view.error_message.as_deref().unwrap_or_default(), 2000)) }
            }
            @if let Some(key) = &view.concurrency_key { dt { "Concurrency key" } dd { code { (key) } } }
            dt { "Input" } dd { code { (value_text(view, ValueOf::Input, &view.input, 400)) } }
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
                            td { (step.started_at.map_or_else(|| "-".to_owned(), time)) }
                            td { (step.ran().map_or_else(|| "-".to_owned(), took)) }
                            td.error {
                                @if let Some(class) = &step.error_class {
                                    (class) ": " (clip(step.error_message.as_deref().unwrap_or_default(), 300))
                                }
                            }
                            td { code { (step.output.as_ref().map_or_else(|| "-".to_owned(), |o| value_text(view, ValueOf::Output { step_id: step.id }, o, 300))) } }
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
                        td { (s.id.0) } td { (s.name) } td { (time(s.created_at)) }
                        td { (s.consumed_by.map_or_else(|| "-".to_owned(), |c| {
                            step_names.get(&c).cloned().unwrap_or_else(|| c.to_string())
                        })) }
                        td { code { (value_text(view, ValueOf::Payload { signal_id: s.id }, &s.payload, 300)) } }
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
                            td { (time(e.created_at)) }
                            td { (e.event) }
                            td { (e.step_name.as_ref().map_or_else(|| "-".to_owned(), |s| format!("{s}#{}", e.attempt.unwrap_or(0)))) }
                            td { (e.actor) }
                            td { (clip(e.reason.as_deref().unwrap_or_default(), 300)) }
                        }
                    }
                }
            }
        }
    }
}

/// The fan-out batches of a run's page, each with a child no live worker
/// can run, if one is stuck so.
/// What keeps the run's due step from running, if anything: no live worker
/// has it, or a flow limit holds it back.
fn waits(view: &RunView, now: chrono::DateTime<chrono::Utc>) -> Markup {
    html! {
        @if let Some(unrunnable) = &view.unrunnable {
            p.banner.stuck role="alert" {
                strong { "Cannot run: " }
                (crate::commands::cannot_run(unrunnable, now))
                " (" a href="/workers" { "live workers" } ")"
            }
        }
        @if let Some(held) = view.held_back() {
            p.banner.held role="status" {
                strong { "Held back: " }
                (crate::commands::held_text(&held, now))
            }
        }
    }
}

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
                            "Definition changed at " (time(change.at)) ": "
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

/// An action form.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    csrf: String,
    actor: String,
    reason: String,
}

pub(crate) async fn act(
    State(app): State<Arc<App>>,
    Path((id, action)): Path<(i64, String)>,
    Extension(csrf): Extension<Csrf>,
    Form(form): Form<ActionForm>,
) -> Response {
    if !same(&form.csrf, &csrf.0) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This form has expired or came from elsewhere; reload the run's page and try again.",
        );
    }
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
const ACTIONS: [&str; 4] = ["pause", "resume", "cancel", "skip"];

/// What a refused or failed action says on the run page, by its code.
const REFUSALS: [(&str, &str); 9] = [
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
fn code_of(error: &Error) -> &'static str {
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
}
