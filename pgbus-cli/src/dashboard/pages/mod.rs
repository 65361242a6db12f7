//! The dashboard's pages: the frame they share here, the overview (the
//! landing page) in `overview`, the runs list in `runs`, a run's page with
//! its actions in `run`, the bulk actions in `bulk`, the queues and the
//! limits in force in `queues`, the insights in `insights`, the live
//! workers in `workers`, the
//! schedules in `schedules`.

mod bulk;
mod insights;
mod overview;
mod queues;
mod run;
mod runs;
mod schedules;
mod workers;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use pgbus_runtime::RunStatus;
use pgbus_runtime::view::Missing;

use super::App;

pub(crate) use bulk::{Jobs, bulk_apply, bulk_confirm, bulk_progress};
pub(crate) use insights::insights;
pub(crate) use overview::overview;
pub(crate) use queues::{limits, queues};
#[cfg(test)]
pub(crate) use run::ACTIONS;
pub(crate) use run::{act, run};
pub(crate) use runs::runs;
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
        Missing::Queue => (
            "queue unclaimed",
            "No live worker that has the step the run waits on claims from its queue",
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

/// The runs list (`runs::LIST`) filtered by workflow and status, from
/// `before` on if given, child runs included: the overview's links into it.
/// The overview counts every run, a fan-out's children too, so its links
/// list them too (the list alone shows top-level runs), or a count of ready
/// children would open an empty list.
fn list_link(workflow: Option<&str>, status: Option<RunStatus>, before: Option<i64>) -> String {
    let mut params = Vec::new();
    if let Some(before) = before {
        params.push(format!("before={before}"));
    }
    if let Some(workflow) = workflow {
        params.push(format!("workflow={}&exact=1", encode(workflow)));
    }
    if let Some(status) = status {
        params.push(format!("status={}", status.as_str()));
    }
    params.push("children=1".to_owned());
    format!("{}?{}", runs::LIST, params.join("&"))
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
