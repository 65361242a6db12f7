//! The insights page: run counts, step outcomes and the slowest steps over a
//! window. Every read is bounded (`InsightsFilter::cap` rows a part) and the
//! page says when one stopped before the window's start.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use pgbus_runtime::window::{WINDOWS, Window};
use pgbus_runtime::{Coverage, InsightsFilter};
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
    let filter = InsightsFilter::new();
    let (activity, outcomes, slowest) = match tokio::try_join!(
        client.run_counts(&range, &filter),
        client.step_outcomes(&range, &filter),
        client.slowest_steps(&range, &filter, 10)
    ) {
        Ok(all) => all,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    let counts = &activity.buckets;
    let (outcomes, slowest) = (&outcomes, &slowest);
    let mut outcome_names: Vec<&str> = outcomes.counts.iter().map(|o| o.outcome.as_str()).collect();
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
            @for (what, coverage) in [("runs started", &activity.started), ("runs ended", &activity.ended), ("pauses", &activity.paused)] {
                @if coverage.partial { p.notice.partial { (partial_note(what, coverage, now)) } }
            }
            table.counts {
                thead { tr { th { "Bucket" } th { "Started" } th { "Finished" } th { "Paused" } th { "Cancelled" } } }
                tbody { @for b in counts { tr {
                    td { (when(b.bucket, now)) } td { (b.started) } td { (b.finished) } td { (b.paused) } td { (b.cancelled) }
                } } }
            }
        }
        section {
            h2 { "Step outcomes" }
            @if outcomes.coverage.partial { p.notice.partial { (partial_note("attempts", &outcomes.coverage, now)) } }
            @if outcomes.counts.is_empty() { p.empty { "No step ended in this window." } } @else {
                table.outcomes {
                    thead { tr { th { "Bucket" } @for name in &outcome_names { th { (name) } } } }
                    tbody {
                        @for b in range.buckets() {
                            @if outcomes.counts.iter().any(|o| o.bucket == b) {
                                tr { td { (when(b, now)) }
                                    @for name in &outcome_names {
                                        td { (outcomes.counts.iter().filter(|o| o.bucket == b && o.outcome.as_str() == *name).map(|o| o.steps).sum::<i64>()) }
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
            @if slowest.coverage.partial { p.notice.partial { (partial_note("attempts", &slowest.coverage, now)) } }
            @if slowest.steps.is_empty() { p.empty { "No step ended in this window." } } @else {
                table.slowest {
                    thead { tr { th { "Workflow" } th { "Step" } th { "Attempts" } th { "Mean run" } th { "Longest run" } th { "Pickup p50" } th { "Pickup p99" } } }
                    tbody { @for s in &slowest.steps { tr {
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

/// What a partial read counted.
fn partial_note(
    what: &str,
    coverage: &Coverage,
    now: chrono::DateTime<chrono::Utc>,
) -> maud::Markup {
    html! {
        "Based on the newest " (coverage.read) " " (what) " of the window (each read stops at "
        (coverage.cap) " rows)"
        @if let Some(at) = coverage.oldest_read { ", back to " (when(at, now)) }
        ": older buckets are not counted."
    }
}
