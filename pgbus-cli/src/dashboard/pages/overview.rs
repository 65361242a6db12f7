//! The overview, the landing page (`/`): per workflow its runs not ended by
//! status, per queue what is due, held and running, and the last hour (its
//! failures, its pauses, its runs ended per minute), each number a link into
//! the list it counts. One bounded read ([`Client::overview`]).
//!
//! [`Client::overview`]: pgbus_runtime::Client::overview

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use pgbus_runtime::{Overview, RunStatus};

use super::{REFRESH_SECS, error_page, list_link, live_page};
use crate::commands::visible;
use crate::dashboard::App;
use crate::dashboard::chart::last_hour;
use crate::dashboard::when::ago;

pub(crate) async fn overview(State(app): State<Arc<App>>, RawQuery(query): RawQuery) -> Response {
    // The runs list lived at `/` with its filters (`/?status=paused`): a
    // bookmark or a link from before the move reaches the list still.
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        return Redirect::permanent(&format!("/runs?{query}")).into_response();
    }
    match app.db.client().overview().await {
        Ok(overview) => live_page("Overview", &render(&overview), REFRESH_SECS).into_response(),
        Err(error) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            &crate::commands::chain(&error),
        ),
    }
}

/// A count as read: one that reached [`Overview::COUNT_CAP`] is a floor.
pub(crate) fn count(n: i64) -> Markup {
    if n >= Overview::COUNT_CAP {
        html! { span title=(format!("at least: the read stops at {} rows", Overview::COUNT_CAP)) { (n) "+" } }
    } else {
        html! { (n) }
    }
}

/// A count linking to the runs list of `workflow` in `status` (no link for
/// none).
fn runs_link(n: i64, workflow: Option<&str>, status: RunStatus) -> Markup {
    if n == 0 {
        return html! { "0" };
    }
    html! { a href=(list_link(workflow, Some(status), None)) { (count(n)) } }
}

/// The overview's body.
pub(crate) fn render(overview: &Overview) -> Markup {
    let at = overview.at;
    html! {
        section {
            h2 { "The last hour" }
            div.facts-row {
                span.fact {
                    strong { (count(overview.failures_last_hour())) } "failures: "
                    a href=(list_link(None, Some(RunStatus::Cancelled), None)) { (count(overview.cancelled_last_hour)) " cancelled" }
                    ", "
                    a href=(list_link(None, Some(RunStatus::Paused), None)) { (count(overview.failed_pauses_last_hour)) " paused on an error" }
                }
                span.fact {
                    strong { (count(overview.pauses_last_hour)) } "pauses (by anyone: an operator, a step, a policy, a stall)"
                }
                span.fact {
                    strong { (count(overview.minutes.iter().map(|m| m.finished).sum())) } "runs finished"
                }
            }
            (last_hour(&overview.minutes, at))
            p.legend {
                span.key.ok { "finished" } span.key.bad { "cancelled" } span.key.paused { "paused" }
            }
        }
        section {
            h2 { "Runs now, by workflow" }
            @if overview.workflows_cut {
                p.cut { "Some workflows may be missing: more than " (Overview::WORKFLOWS) " have runs not ended, or a status holds more than " (Overview::COUNT_CAP) " runs. Filter the runs by workflow to see the others." }
            }
            @if overview.workflows.is_empty() {
                p.empty { "No run is ready, performing or paused." }
            } @else {
                table.workflows-now {
                    thead { tr { th { "Workflow" } th.num { "Ready" } th.num { "Performing" } th.num { "Paused" } } }
                    tbody {
                        @for w in &overview.workflows {
                            tr {
                                td { a href=(list_link(Some(&w.workflow), None, None)) { (visible(&w.workflow)) } }
                                td.num { (runs_link(w.ready, Some(&w.workflow), RunStatus::Ready)) }
                                td.num { (runs_link(w.performing, Some(&w.workflow), RunStatus::Performing)) }
                                td.num { (runs_link(w.paused, Some(&w.workflow), RunStatus::Paused)) }
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "Queues now" }
            (queues_table(overview))
        }
    }
}

/// Per queue: due now, how long the oldest has been due, held back by
/// limits, in flight. Shared with the queues page.
pub(crate) fn queues_table(overview: &Overview) -> Markup {
    let at = overview.at;
    html! {
        @if overview.queues.is_empty() {
            p.empty { "No step is due, held back or running." }
        } @else {
            table.queues-now {
                thead { tr {
                    th { "Queue" } th.num { "Due now" } th { "Oldest due" }
                    th.num { "Held by limits" } th.num { "In flight" }
                } }
                tbody {
                    @for q in &overview.queues {
                        tr {
                            td { (visible(&q.queue)) }
                            td.num { (count(q.due)) }
                            td {
                                @match q.oldest_due {
                                    Some(due) => { span title=(crate::commands::time(due)) { "due " (ago(due, at)) } }
                                    None => { "-" }
                                }
                            }
                            td.num {
                                @if q.held > 0 { a href="/limits" { (count(q.held)) } } @else { "0" }
                            }
                            td.num { (count(q.in_flight)) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
