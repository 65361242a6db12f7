//! The insights page: run counts, step outcomes and the slowest steps over a
//! window.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use pgbus_runtime::window::{WINDOWS, Window};
use serde::Deserialize;

use super::{error_page, now, page};
use crate::dashboard::App;
use crate::dashboard::when::when;

/// The insights page's window.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InsightsQuery {
    window: Option<String>,
}

pub(crate) async fn insights(
    State(app): State<Arc<App>>,
    Query(query): Query<InsightsQuery>,
) -> Response {
    let Ok(window) = query.window.as_deref().unwrap_or("24h").parse::<Window>() else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Unknown window: use 1h, 24h, 7d or 30d.",
        );
    };
    let now = match now(&app).await {
        Ok(now) => now,
        Err(error) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &error),
    };
    let range = window.at(now, app.settings.retention);
    let client = app.db.client();
    let (counts, outcomes, slowest) = match tokio::try_join!(
        client.run_counts(&range),
        client.step_outcomes(&range),
        client.slowest_steps(&range, 10)
    ) {
        Ok(all) => all,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    let mut outcome_names: Vec<&str> = outcomes.iter().map(|o| o.outcome.as_str()).collect();
    outcome_names.sort_unstable();
    outcome_names.dedup();
    let body = html! {
        nav.windows {
            @for w in WINDOWS {
                a class=(if w == window { "current" } else { "" }) href=(format!("/insights?window={w}")) { (w.as_str()) }
            }
        }
        p { "From " (when(range.from, now)) " to " (when(range.to, now)) ", in buckets of "
            (pgbus_core::format_duration_ms(u64::try_from(range.bucket.as_millis()).unwrap_or(u64::MAX))) "." }
        @if range.capped {
            p.notice { "Cut to the retention age: ended runs last changed before then are deleted, so older buckets would undercount." }
        }
        section {
            h2 { "Runs" }
            table.counts {
                thead { tr { th { "Bucket" } th { "Started" } th { "Finished" } th { "Paused" } th { "Cancelled" } } }
                tbody { @for b in &counts { tr {
                    td { (when(b.bucket, now)) } td { (b.started) } td { (b.finished) } td { (b.paused) } td { (b.cancelled) }
                } } }
            }
        }
        section {
            h2 { "Step outcomes" }
            @if outcomes.is_empty() { p.empty { "No step ended in this window." } } @else {
                table.outcomes {
                    thead { tr { th { "Bucket" } @for name in &outcome_names { th { (name) } } } }
                    tbody {
                        @for b in range.buckets() {
                            @if outcomes.iter().any(|o| o.bucket == b) {
                                tr { td { (when(b, now)) }
                                    @for name in &outcome_names {
                                        td { (outcomes.iter().find(|o| o.bucket == b && o.outcome.as_str() == *name).map_or(0, |o| o.steps)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "Slowest steps and pickup latency" }
            @if slowest.is_empty() { p.empty { "No step ended in this window." } } @else {
                table.slowest {
                    thead { tr { th { "Workflow" } th { "Step" } th { "Attempts" } th { "Mean run" } th { "Longest run" } th { "Pickup p50" } th { "Pickup p99" } } }
                    tbody { @for s in &slowest { tr {
                        td { (crate::commands::visible(&s.workflow)) } td { (crate::commands::visible(&s.step)) } td { (s.attempts) }
                        td { (format!("{:.1} ms", s.mean_ms)) } td { (format!("{:.1} ms", s.max_ms)) }
                        td { (format!("{:.1} ms", s.pickup_p50_ms)) } td { (format!("{:.1} ms", s.pickup_p99_ms)) }
                    } } }
                }
            }
        }
    };
    page(&format!("Insights, last {window}"), &body).into_response()
}
