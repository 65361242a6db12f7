//! The queues page: per queue what is due, for how long, held back by
//! limits and in flight (the overview's queues), and the live workers that
//! claim from it (the registry, as the workers page reads it); and the
//! limits page: the flow limits in force and what each key holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use pgbus_runtime::{LimitsNow, Overview, WorkerView};

use super::overview::count;
use super::{REFRESH_SECS, error_page, live_page};
use crate::commands::{took, visible};
use crate::dashboard::App;
use crate::dashboard::when::ago;

/// The most live workers read for the queues page, as the workers page.
const WORKERS_READ: usize = 200;
/// The most worker names a queue's row names; the rest are counted.
const NAMES_SHOWN: usize = 5;

pub(crate) async fn queues(State(app): State<Arc<App>>) -> Response {
    let client = app.db.client();
    let threshold = app.settings.lost_worker_threshold;
    match tokio::try_join!(client.overview(), client.workers(threshold, WORKERS_READ)) {
        Ok((overview, workers)) => {
            let threshold = chrono::Duration::from_std(threshold).unwrap_or(chrono::Duration::MAX);
            let body = render_queues(&overview, &workers, threshold);
            live_page("Queues", &body, REFRESH_SECS).into_response()
        }
        Err(error) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            &crate::commands::chain(&error),
        ),
    }
}

/// Every queue with steps due, held or running, or a live worker claiming
/// from it, by name (bytewise).
pub(crate) fn render_queues(
    overview: &Overview,
    workers: &[WorkerView],
    threshold: chrono::Duration,
) -> Markup {
    let mut listening: BTreeMap<&str, Vec<&WorkerView>> = BTreeMap::new();
    for worker in workers {
        for queue in &worker.queues {
            listening.entry(queue).or_default().push(worker);
        }
    }
    let mut names: Vec<&str> = overview
        .queues
        .iter()
        .map(|q| q.queue.as_str())
        .chain(listening.keys().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    let at = overview.at;
    html! {
        p.cut {
            "Due: steps whose time has come, of ready runs, not held back (what a claim takes next). "
            "Held: rows a concurrency limit keeps back (see " a href="/limits" { "Limits" } "). "
            "Live workers: a heartbeat within the last " (took(threshold)) "."
        }
        @if names.is_empty() {
            p.empty { "No queue has a step due, held or running, and no live worker claims from any." }
        } @else {
            table.queues {
                thead { tr {
                    th { "Queue" } th.num { "Due now" } th { "Oldest due" } th.num { "Held by limits" }
                    th.num { "In flight" } th { "Live workers" }
                } }
                tbody {
                    @for name in &names {
                        @let now = overview.queues.iter().find(|q| q.queue == *name);
                        @let here = listening.get(name).map_or(&[][..], Vec::as_slice);
                        tr {
                            td { (visible(name)) }
                            td.num { (now.map_or(html! { "0" }, |q| count(q.due))) }
                            td {
                                @match now.and_then(|q| q.oldest_due) {
                                    Some(due) => { span title=(crate::commands::time(due)) { "due " (ago(due, at)) } }
                                    None => { "-" }
                                }
                            }
                            td.num {
                                @match now.filter(|q| q.held > 0) {
                                    Some(q) => { a href="/limits" { (count(q.held)) } }
                                    None => { "0" }
                                }
                            }
                            td.num { (now.map_or(html! { "0" }, |q| count(q.in_flight))) }
                            td.listening {
                                @if here.is_empty() {
                                    @if now.is_some_and(|q| q.due > 0) {
                                        span.stuck { "none: its due steps wait" }
                                    } @else { "none" }
                                } @else {
                                    (here.len()) ": "
                                    @for (i, w) in here.iter().take(NAMES_SHOWN).enumerate() {
                                        @if i > 0 { ", " }
                                        span title=(visible(&w.id)) { (visible(w.name.as_deref().unwrap_or(&w.id))) }
                                    }
                                    @if here.len() > NAMES_SHOWN { ", …" }
                                }
                            }
                        }
                    }
                }
            }
            @if workers.len() == WORKERS_READ {
                p.cut { "Workers: the first " (WORKERS_READ) " by name only (see " a href="/workers" { "Workers" } ")." }
            }
        }
    }
}

pub(crate) async fn limits(State(app): State<Arc<App>>) -> Response {
    match app.db.client().limits().await {
        Ok(limits) => live_page("Limits", &render_limits(&limits), REFRESH_SECS).into_response(),
        Err(error) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            &crate::commands::chain(&error),
        ),
    }
}

/// A count of [`LimitsNow`]: one that reached its cap is a floor.
fn limits_count(n: i64) -> Markup {
    if n >= LimitsNow::COUNT_CAP {
        html! { span title=(format!("at least: the read stops at {} rows", LimitsNow::COUNT_CAP)) { (n) "+" } }
    } else {
        html! { (n) }
    }
}

/// The limits in force and each key's use.
pub(crate) fn render_limits(limits: &LimitsNow) -> Markup {
    let orphans: Vec<_> = limits
        .keys
        .iter()
        .filter(|k| !limits.concurrency.iter().any(|c| c.limit == k.limit))
        .collect();
    html! {
        p.cut {
            "The limits the workers registered last (each workflow's by its last registering worker, "
            "each queue's by any worker declaring it). A slot is held by a run with a step in "
            "progress, or for a limit held by runs, by the run from its first claimed step until it "
            "ends or pauses; a row held back waits, out of the claim's way, for a slot of its key."
        }
        section {
            h2 { "Concurrency limits" }
            @if limits.concurrency.is_empty() {
                p.empty { "None in force." }
            } @else {
                table.limits {
                    thead { tr {
                        th { "Limit" } th { "Workflow" } th.num { "Slots" } th { "Held by" }
                        th { "Key" } th.num { "Slots held" } th.num { "Rows held back" }
                    } }
                    tbody {
                        @for c in &limits.concurrency {
                            @let keys: Vec<_> = limits.keys_of(&c.limit).collect();
                            @let span = (keys.len() > 1).then_some(keys.len());
                            @let per_key = c.limit.starts_with("key:");
                            tr {
                                td rowspan=[span] { code { (visible(&c.limit)) } }
                                td rowspan=[span] { (c.workflow.as_deref().map_or_else(|| "-".to_owned(), visible)) }
                                td.num rowspan=[span] { (c.max_in_flight) @if per_key { " per key" } }
                                td rowspan=[span] { (c.holder.as_str()) }
                                @match keys.first() {
                                    Some(k) => { (key_cells(k, c.max_in_flight)) }
                                    None => { td.empty { "nothing held" } td.num { "0" } td.num { "0" } }
                                }
                            }
                            @for k in keys.iter().skip(1) {
                                tr { (key_cells(k, c.max_in_flight)) }
                            }
                        }
                    }
                }
            }
            @if !orphans.is_empty() {
                p.notice { "Keys whose limit is no longer in force (a deploy dropped it): their held rows go at the next release or claim." }
                table.limits {
                    thead { tr { th { "Key" } th.num { "Slots held" } th.num { "Rows held back" } } }
                    tbody { @for k in &orphans { tr {
                        td { code { (visible(&k.key)) } } td.num { (limits_count(k.in_flight)) } td.num { (limits_count(k.held)) }
                    } } }
                }
            }
            @if limits.keys.len() >= usize::try_from(LimitsNow::KEYS_MAX).unwrap_or(usize::MAX) {
                p.cut { "The first " (LimitsNow::KEYS_MAX) " keys in use only." }
            }
        }
        section {
            h2 { "Rate limits" }
            @if limits.rates.is_empty() {
                p.empty { "None in force." }
            } @else {
                table.rates {
                    thead { tr { th { "Limit" } th { "Workflow" } th { "Rate" } th.num { "Starts in the window now" } } }
                    tbody {
                        @for r in &limits.rates {
                            tr {
                                td { code { (visible(&r.limit)) } }
                                td { (visible(&r.workflow)) }
                                td {
                                    (r.max_starts) " per "
                                    (pgbus_core::format_duration_ms(u64::try_from(r.period_ms).unwrap_or(0)))
                                    @if r.limit.starts_with("key:") { ", per key" }
                                }
                                td.num {
                                    @match r.starts_in_window {
                                        Some(n) => { (n) " of " (r.max_starts) }
                                        None => { span title="one window per concurrency key; not listed" { "per key" } }
                                    }
                                }
                            }
                        }
                    }
                }
                p.cut { "Rows waiting for a rate's window are due later; they are not counted here." }
            }
        }
    }
}

/// A key's cells: its name, slots held of the limit, rows held back.
fn key_cells(k: &pgbus_runtime::KeyNow, max: i64) -> Markup {
    html! {
        td { code { (visible(&k.key)) } }
        td class=(if k.in_flight >= max { "num full" } else { "num" }) { (limits_count(k.in_flight)) " of " (max) }
        td.num { (limits_count(k.held)) }
    }
}

#[cfg(test)]
mod tests;
