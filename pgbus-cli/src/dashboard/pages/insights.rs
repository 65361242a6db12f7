//! The insights page: run counts (top-level runs and fan-out children
//! apart), step outcomes (failures marked) and the slowest steps over a
//! window, of every workflow or those a prefix names. Every read is bounded
//! (`InsightsFilter::cap` rows a part) and the page says when one stopped
//! before the window's start.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgbus_runtime::window::{Range, WINDOWS, Window};
use pgbus_runtime::{
    Coverage, InsightsFilter, OutcomeCount, RunActivity, SlowestSteps, StepOutcome, StepOutcomes,
};
use serde::Deserialize;

use super::{error_page, now, page};
use crate::commands::visible;
use crate::dashboard::App;
use crate::dashboard::when::when;

/// The insights page's window and workflow prefix.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct InsightsQuery {
    window: Option<String>,
    workflow: Option<String>,
}

/// Why the page shows the window it shows.
enum Picked {
    /// The link named it.
    Asked,
    /// The smallest window holding the newest run's start.
    Newest(DateTime<Utc>),
    /// The newest run started before the longest window.
    OlderThanAll(DateTime<Utc>),
    /// No run yet.
    NoRuns,
}

/// The smallest window ending at `now` that holds `newest` (the newest
/// run's start), and why.
fn pick_window(newest: Option<DateTime<Utc>>, now: DateTime<Utc>) -> (Window, Picked) {
    let Some(newest) = newest else {
        return (Window::Day, Picked::NoRuns);
    };
    WINDOWS
        .into_iter()
        .find(|w| newest >= now - chrono::TimeDelta::from_std(w.span()).unwrap_or_default())
        .map_or((Window::Month, Picked::OlderThanAll(newest)), |w| {
            (w, Picked::Newest(newest))
        })
}

pub(crate) async fn insights(
    State(app): State<Arc<App>>,
    Query(query): Query<InsightsQuery>,
) -> Response {
    let asked = match query.window.as_deref().filter(|w| !w.is_empty()) {
        None => None,
        Some(text) => match text.parse::<Window>() {
            Ok(window) => Some(window),
            Err(_) => {
                return error_page(
                    StatusCode::BAD_REQUEST,
                    "Unknown window: use 1h, 24h, 7d or 30d.",
                );
            }
        },
    };
    let prefix = query.workflow.filter(|p| !p.is_empty());
    let now = match now(&app).await {
        Ok(now) => now,
        Err(error) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &error),
    };
    let client = app.db.client();
    let (window, picked) = match asked {
        Some(window) => (window, Picked::Asked),
        None => match client.newest_activity().await {
            Ok(newest) => pick_window(newest, now),
            Err(error) => {
                return error_page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &crate::commands::chain(&error),
                );
            }
        },
    };
    let range = window.at(now, app.settings.retention);
    let mut filter = InsightsFilter::new();
    filter.workflow_prefix.clone_from(&prefix);
    // The names for the filter are read after the counts, not beside them:
    // a fourth connection at once may wait for the pool, and a page that
    // fails on one read drops the others while they still wait in the server.
    let read = async {
        let (activity, outcomes, slowest) = tokio::try_join!(
            client.run_counts(&range, &filter),
            client.step_outcomes(&range, &filter),
            client.slowest_steps(&range, &filter, 10)
        )?;
        Ok::<_, pgbus_runtime::Error>((client.workflows().await?, activity, outcomes, slowest))
    };
    let (workflows, activity, outcomes, slowest) = match read.await {
        Ok(all) => all,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    let columns = outcome_columns(&outcomes.counts);
    let link = |w: Window| {
        let mut params = vec![("window", w.as_str())];
        if let Some(p) = &prefix {
            params.push(("workflow", p));
        }
        format!(
            "/insights?{}",
            serde_urlencoded::to_string(params).unwrap_or_default()
        )
    };
    let title = match &prefix {
        None => format!("Insights, last {window}"),
        Some(p) => format!(
            "Insights, last {window}, workflows starting with {}",
            visible(p)
        ),
    };
    let body = html! {
        nav.windows {
            @for w in WINDOWS {
                a class=(if w == window { "current" } else { "" }) href=(link(w)) { (w.as_str()) }
            }
        }
        form.filters method="get" action="/insights" {
            @if asked.is_some() { input type="hidden" name="window" value=(window.as_str()); }
            label { "Workflow " input name="workflow" list="workflows" placeholder="name or its start" value=(prefix.clone().unwrap_or_default()); }
            datalist #workflows {
                @for name in &workflows { option value=(name) {} }
            }
            button type="submit" { "Show" }
            @if prefix.is_some() {
                a href=(if asked.is_some() { format!("/insights?window={window}") } else { "/insights".to_owned() }) { "every workflow" }
            }
        }
        p.picked { (why(&picked, window, now)) }
        p { "From " (when(range.from, now)) " to " (when(range.to, now)) ", in buckets of "
            (pgbus_core::format_duration_ms(u64::try_from(range.bucket.as_millis()).unwrap_or(u64::MAX))) "." }
        @if range.capped {
            p.notice { "Cut to the retention age: ended runs last changed before then are deleted, so older buckets would undercount." }
        }
        (runs_section(&activity, &range, now))
        (outcomes_section(&outcomes, &columns, &range, now))
        (slowest_section(&slowest, now))
    };
    page(&title, &body).into_response()
}

/// Runs per bucket: top-level runs and children apart, and pauses.
fn runs_section(activity: &RunActivity, range: &Range, now: DateTime<Utc>) -> Markup {
    html! {
    section {
        h2 { "Runs" }
        @for (what, coverage) in [("runs started", &activity.started), ("runs ended", &activity.ended), ("pauses", &activity.paused)] {
            @if coverage.partial { p.notice.partial { (partial_note(what, coverage, now)) } }
        }
        table.counts {
            thead {
                tr { th rowspan="2" { "Bucket" } th colspan="2" { "Started" } th colspan="2" { "Finished" } th colspan="2" { "Cancelled" } th rowspan="2" { "Paused" } }
                tr { @for _ in 0..3 { th { "top-level" } th { "children" } } }
            }
            tbody { @for b in &activity.buckets {
                @let top = b.top_level();
                @let end = b.bucket + chrono::TimeDelta::from_std(range.bucket).unwrap_or_default();
                tr {
                    td { (when(b.bucket, now)) }
                    (count(top.started, &activity.started, b.bucket, end))
                    (count(b.children.started, &activity.started, b.bucket, end))
                    (count(top.finished, &activity.ended, b.bucket, end))
                    (count(b.children.finished, &activity.ended, b.bucket, end))
                    (count(top.cancelled, &activity.ended, b.bucket, end))
                    (count(b.children.cancelled, &activity.ended, b.bucket, end))
                    (count(b.paused, &activity.paused, b.bucket, end))
                }
            } }
        }
        p.empty { "Children are runs a " code { "fan_out" } " started; top-level runs are the rest. Pauses count every pause of a run (by an operator, a step, a policy or a stall), children's included." }
    }
    }
}

/// Step outcomes per bucket, failures marked and totalled.
fn outcomes_section(
    outcomes: &StepOutcomes,
    columns: &[Column],
    range: &Range,
    now: DateTime<Utc>,
) -> Markup {
    html! {
    section {
        h2 { "Step outcomes" }
        @if outcomes.coverage.partial { p.notice.partial { (partial_note("attempts", &outcomes.coverage, now)) } }
        @if outcomes.counts.is_empty() { p.empty { "No step ended in this window." } } @else {
            (outcome_table(&outcomes.counts, columns, range, &outcomes.coverage, now))
            p.empty { "Failures (marked) are attempts that ended with an error, whatever followed (a reattempt, or a pause, skip or cancel by the step's policy), and reattempted ones. An operator's skip or cancel, and a step's own pause, cancel or early finish without an error, are not failures." }
        }
    }
    }
}

/// The slowest steps and their pickup latency.
fn slowest_section(slowest: &SlowestSteps, now: DateTime<Utc>) -> Markup {
    html! {
    section {
        h2 { "Slowest steps and pickup latency" }
        @if slowest.coverage.partial { p.notice.partial { (partial_note("attempts", &slowest.coverage, now)) } }
        @if slowest.steps.is_empty() { p.empty { "No step ended in this window." } } @else {
            table.slowest {
                thead { tr { th { "Workflow" } th { "Step" } th { "Attempts" } th { "Mean run" } th { "Longest run" } th { "Pickup p50" } th { "Pickup p99" } } }
                tbody { @for s in &slowest.steps { tr {
                    td { (visible(&s.workflow)) } td { (visible(&s.step)) } td { (s.attempts) }
                    td { (format!("{:.1} ms", s.mean_ms)) } td { (format!("{:.1} ms", s.max_ms)) }
                    td { (format!("{:.1} ms", s.pickup_p50_ms)) } td { (format!("{:.1} ms", s.pickup_p99_ms)) }
                } } }
            }
        }
    }
    }
}

/// The sentence saying which window the page shows and why.
fn why(picked: &Picked, window: Window, now: DateTime<Utc>) -> Markup {
    match picked {
        Picked::Asked => html! { "Window " (window.as_str()) ", as asked." },
        Picked::Newest(at) => html! {
            "Window " (window.as_str()) ", picked: the smallest of 1h, 24h, 7d and 30d that holds the newest run's start, "
            (when(*at, now)) "."
        },
        Picked::OlderThanAll(at) => html! {
            "Window " (window.as_str()) ", picked: the newest run started " (when(*at, now))
            ", before the longest window, so nothing here is recent."
        },
        Picked::NoRuns => html! { "Window " (window.as_str()) ", picked: no run has started yet." },
    }
}

/// What a partial read counted.
fn partial_note(what: &str, coverage: &Coverage, now: DateTime<Utc>) -> Markup {
    html! {
        "Based on the newest " (coverage.read) " " (what) " of the window (each read stops at "
        (coverage.cap) " rows)"
        @if let Some(at) = coverage.oldest_read { ", back to " (when(at, now)) }
        ": buckets before that are not counted (–), the one holding it only in part (+)."
    }
}

/// A count cell: whole, in part (`n+`), or not read at all (`–`).
fn count(n: i64, coverage: &Coverage, start: DateTime<Utc>, end: DateTime<Utc>) -> Markup {
    cell(n, coverage, start, end, "num")
}

/// A count cell of `class`: whole, in part (`n+`, muted), or not read at
/// all (`–`).
fn cell(
    n: i64,
    coverage: &Coverage,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    class: &str,
) -> Markup {
    if coverage.whole_from(start) {
        html! { td class=(class) { (n) } }
    } else if coverage.oldest_read.is_some_and(|oldest| oldest < end) {
        html! { td class=(format!("{class} part")) title="counted in part: the read stopped inside this bucket" { (n) "+" } }
    } else {
        html! { td class=(format!("{class} unread")) title="not read: older than the rows the read takes" { "–" } }
    }
}

/// A column of the outcomes table: an outcome, failed or not.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Column {
    outcome: StepOutcome,
    failed: bool,
}

impl Column {
    fn label(self) -> String {
        match (self.outcome, self.failed) {
            (StepOutcome::Reattempted, _) => "reattempted".to_owned(),
            (outcome, true) => format!("{} on an error", outcome.as_str().replace('_', " ")),
            (outcome, false) => outcome.as_str().replace('_', " "),
        }
    }
}

/// The outcomes the counts hold, in documentation order, clean before failed.
fn outcome_columns(counts: &[OutcomeCount]) -> Vec<Column> {
    let mut columns = Vec::new();
    for outcome in StepOutcome::ALL {
        for failed in [false, true] {
            let column = Column {
                outcome: *outcome,
                failed,
            };
            if counts
                .iter()
                .any(|c| c.outcome == *outcome && c.failed == failed)
            {
                columns.push(column);
            }
        }
    }
    columns
}

fn outcome_table(
    counts: &[OutcomeCount],
    columns: &[Column],
    range: &Range,
    coverage: &Coverage,
    now: DateTime<Utc>,
) -> Markup {
    let count_of = |bucket: DateTime<Utc>, column: Column| {
        counts
            .iter()
            .find(|c| {
                c.bucket == bucket && c.outcome == column.outcome && c.failed == column.failed
            })
            .map_or(0, |c| c.steps)
    };
    let step = chrono::TimeDelta::from_std(range.bucket).unwrap_or_default();
    html! {
        table.outcomes {
            thead { tr {
                th { "Bucket" }
                @for column in columns {
                    th class=[column.failed.then_some("failure")] { (column.label()) }
                }
                th.failure { "Failures" }
            } }
            tbody {
                @for b in range.buckets() {
                    @if counts.iter().any(|o| o.bucket == b) {
                        @let failures: i64 = columns.iter().filter(|c| c.failed).map(|c| count_of(b, *c)).sum();
                        tr {
                            td { (when(b, now)) }
                            @for column in columns {
                                @let n = count_of(b, *column);
                                (cell(n, coverage, b, b + step, if column.failed && n > 0 { "num failure" } else { "num" }))
                            }
                            (cell(failures, coverage, b, b + step, "num failure"))
                        }
                    }
                }
            }
        }
    }
}
