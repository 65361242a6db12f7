//! The dashboard's pages: the frame they share and the runs list here, the
//! overview (the landing page) in `overview`, a run's page with its actions
//! in `run`, the queues and the limits in force in `queues`, the insights
//! in `insights`, the live workers in `workers`, the
//! schedules in `schedules`.

mod bulk;
mod insights;
mod overview;
mod queues;
mod run;
mod schedules;
mod workers;

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use pgbus_runtime::view::{Missing, RunFilter};
use pgbus_runtime::{RunId, RunStatus};
use serde::Deserialize;

use super::App;
use crate::dashboard::when::when;

pub(crate) use bulk::{Jobs, bulk_apply, bulk_confirm, bulk_progress};
pub(crate) use insights::insights;
pub(crate) use overview::overview;
pub(crate) use queues::{limits, queues};
#[cfg(test)]
pub(crate) use run::ACTIONS;
pub(crate) use run::{act, run};
pub(crate) use schedules::schedules;
pub(crate) use workers::workers;

/// How often, in seconds, a page that changes on its own reloads itself:
/// the overview, the runs list, a run that has not ended.
const REFRESH_SECS: u32 = 5;

/// A page in the dashboard's frame, which stays as it was drawn (an ended
/// run, a form, a page of counts).
fn page(title: &str, body: &Markup) -> Markup {
    frame(title, body, None)
}

/// A page that changes on its own: reloaded every `every` seconds while it
/// is shown and nobody is typing in it (`refresh.js`).
fn live_page(title: &str, body: &Markup, every: u32) -> Markup {
    frame(title, body, Some(every))
}

fn frame(title: &str, body: &Markup, refresh: Option<u32>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · pgbus" }
                link rel="stylesheet" href="/style.css";
                @if refresh.is_some() { script src="/refresh.js" defer {} }
            }
            body data-refresh=[refresh] {
                header {
                    a.brand href="/" { "pgbus" }
                    (PreEscaped(SOURCE_MARK))
                    nav {
                        a href="/" { "Overview" } a href="/runs" { "Runs" } a href="/queues" { "Queues" }
                        a href="/limits" { "Limits" } a href="/insights" { "Insights" }
                        a href="/workers" { "Workers" } a href="/schedules" { "Schedules" }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// Where a page's header says which database it read: an empty mark the
/// frame draws, filled by the router once the page is drawn
/// (`dashboard::with_source`). Text from runs is escaped, so only the frame
/// draws it.
pub(crate) const SOURCE_MARK: &str = "<span class=\"source\"></span>";

/// What a page's header says of the database it read (`source`).
pub(crate) fn source_line(source: &super::Source) -> Markup {
    use pgbus_runtime::ReplicaLag;
    match source {
        super::Source::Primary => html! { span.source { "read from the primary" } },
        super::Source::AfterAction => html! {
            span.source title="This browser's pages read the primary for a few seconds after an action, so they show it." {
                "read from the primary, after your action"
            }
        },
        super::Source::Replica(Ok(ReplicaLag::Behind { ms })) => html! {
            span class=(if *ms >= 10_000 { "source behind" } else { "source" }) {
                "read from the replica, " (format!("{:.1}", *ms as f64 / 1000.0)) " s behind"
            }
        },
        super::Source::Replica(Ok(ReplicaLag::NothingReplayed)) => html! {
            span.source.behind { "read from the replica, which has replayed nothing yet" }
        },
        super::Source::Replica(Ok(_)) => html! {
            span.source title="The server at --replica-url is not in recovery." {
                "read from the replica URL, which is not a replica (nothing lags)"
            }
        },
        super::Source::Replica(Err(error)) => html! {
            span.source.behind title=(error) { "read from the replica, lag unknown" }
        },
    }
}

/// A page with one message.
pub(crate) fn plain_page(title: &str, message: &str) -> Markup {
    page(title, &html! { p { (message) } })
}

/// Any other address.
pub(crate) async fn not_found() -> Response {
    error_page(StatusCode::NOT_FOUND, "There is no such page.")
}

/// A page for an error, with its status.
fn error_page(status: StatusCode, error: &str) -> Response {
    (status, plain_page("Something went wrong", error)).into_response()
}

fn status_badge(status: RunStatus) -> Markup {
    html! { span class=(format!("badge {}", status.as_str())) { (status.as_str()) } }
}

/// The mark of a run no live worker can run, beside its status.
fn stuck_badge(missing: Missing) -> Markup {
    let (word, title) = match missing {
        Missing::Step => (
            "step missing",
            "No live worker's definition of this workflow has the step the run waits on",
        ),
        _ => (
            "workflow missing",
            "No live worker registered this run's workflow",
        ),
    };
    html! { span.badge.stuck title=(title) { "cannot run: " (word) } }
}

/// The runs list's filters and page.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunsQuery {
    workflow: Option<String>,
    status: Option<String>,
    before: Option<i64>,
}

/// How many runs a page of the list shows.
const PAGE: u32 = 50;

pub(crate) async fn runs(State(app): State<Arc<App>>, Query(query): Query<RunsQuery>) -> Response {
    let workflow = query.workflow.filter(|w| !w.trim().is_empty());
    if workflow.as_deref().is_some_and(|w| w.contains('\0')) {
        return error_page(
            StatusCode::BAD_REQUEST,
            "A workflow name has no NUL characters.",
        );
    }
    let status = match parse_status(query.status.as_deref()) {
        Ok(status) => status,
        Err(refused) => return error_page(StatusCode::BAD_REQUEST, &refused),
    };
    let mut filter = RunFilter::new()
        .limit(PAGE)
        .lost_worker_threshold(app.settings.lost_worker_threshold);
    filter.workflow.clone_from(&workflow);
    filter.status = status;
    filter.before = query.before.map(RunId);
    let runs = match app.db.client().list_runs(&filter).await {
        Ok(runs) => runs,
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
    let next = (runs.len() == PAGE as usize)
        .then(|| runs.last().map(|r| r.id.0))
        .flatten();
    let body = html! {
        form.filters method="get" action="/runs" {
            label { "Workflow " input name="workflow" value=(workflow.clone().unwrap_or_default()); }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in RunStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(*s)] { (s.as_str()) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        @if runs.is_empty() {
            p.empty { "No runs match." }
        } @else {
            table.runs {
                thead { tr { th { "Run" } th { "Workflow" } th { "Status" } th { "Step" } th { "Created" } th { "Updated" } } }
                tbody {
                    @for run in &runs {
                        tr {
                            td { a href=(format!("/runs/{}", run.id.0)) { (run.id.0) } }
                            td { (crate::commands::visible(&run.workflow)) }
                            td {
                                (status_badge(run.status))
                                @if let Some(missing) = run.unrunnable { (stuck_badge(missing)) }
                            }
                            td { (crate::commands::visible(run.current_step.as_deref().unwrap_or("-"))) }
                            td { (when(run.created_at, now)) }
                            td { (when(run.updated_at, now)) }
                        }
                    }
                }
            }
        }
        @if let Some(status) = status.filter(|_| !runs.is_empty()) {
            @let actions = bulk::bulk_actions(status);
            @if !actions.is_empty() {
                p.bulk {
                    "All the runs this filter matches: "
                    @for (action, label) in actions {
                        a.bulk href=(bulk_link(action, workflow.as_deref(), status, query.before)) { (label) } " "
                    }
                }
            }
        }
        // No "newer": the list reads by id descending from a `before`
        // cursor only, so the page above this one cannot be read; the
        // newest page can.
        @if query.before.is_some() {
            a.newest href=(list_link(workflow.as_deref(), status, None)) { "← Newest runs" } " "
        }
        @if let Some(before) = next {
            a.next href=(list_link(workflow.as_deref(), status, Some(before))) { "Older runs →" }
        }
    };
    live_page("Runs", &body, REFRESH_SECS).into_response()
}

/// The status a link asks for, if any: one of [`RunStatus::ALL`], else
/// what the error page says, naming them (never the link's own text: a link
/// cannot make the page say what it likes).
fn parse_status(text: Option<&str>) -> Result<Option<RunStatus>, String> {
    match text.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(text) => text.parse::<RunStatus>().map(Some).map_err(|_| {
            let known: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("Unknown status: use one of {}.", known.join(", "))
        }),
    }
}

/// The runs list with its filters, from `before` on if given.
fn list_link(workflow: Option<&str>, status: Option<RunStatus>, before: Option<i64>) -> String {
    let mut params = Vec::new();
    if let Some(before) = before {
        params.push(format!("before={before}"));
    }
    if let Some(workflow) = workflow {
        params.push(format!("workflow={}", encode(workflow)));
    }
    if let Some(status) = status {
        params.push(format!("status={}", status.as_str()));
    }
    format!("/runs?{}", params.join("&"))
}

/// The confirmation page of a bulk `action` on the runs list's filter.
fn bulk_link(
    action: &str,
    workflow: Option<&str>,
    status: RunStatus,
    before: Option<i64>,
) -> String {
    let list = list_link(workflow, Some(status), before);
    let filters = list.split_once('?').map_or("", |(_, query)| query);
    format!("/bulk?action={action}&{filters}")
}

/// `text` safe in a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The database's time (what stored times are on).
async fn now(app: &App) -> Result<chrono::DateTime<chrono::Utc>, String> {
    crate::commands::db_now(&app.db)
        .await
        .map_err(|e| crate::commands::chain(e.as_ref()))
}
