//! The dashboard's pages: the frame they share here, the runs list in
//! `runs`, a run's page with its actions in `run`, the bulk actions in
//! `bulk`, the insights in `insights`, the live workers in `workers`, the
//! schedules in `schedules`.

mod bulk;
mod insights;
mod run;
mod runs;
mod schedules;
mod workers;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use pgbus_runtime::RunStatus;
use pgbus_runtime::view::Missing;

use super::App;

pub(crate) use bulk::{Jobs, bulk_apply, bulk_confirm, bulk_progress};
pub(crate) use insights::insights;
#[cfg(test)]
pub(crate) use run::ACTIONS;
pub(crate) use run::{act, run};
pub(crate) use runs::runs;
pub(crate) use schedules::schedules;
pub(crate) use workers::workers;

/// How often, in seconds, a page that changes on its own reloads itself:
/// the runs list, a run that has not ended.
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
                    nav { a href="/" { "Runs" } a href="/insights" { "Insights" } a href="/workers" { "Workers" } a href="/schedules" { "Schedules" } }
                }
                main { h1 { (title) } (body) }
            }
        }
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

/// The database's time (what stored times are on).
async fn now(app: &App) -> Result<chrono::DateTime<chrono::Utc>, String> {
    crate::commands::db_now(&app.db)
        .await
        .map_err(|e| crate::commands::chain(e.as_ref()))
}
