//! The workers page: the live workers and what each runs, as `pgbus workers`
//! lists them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::{error_page, page};
use crate::commands::{SHORT_DIGEST, took, visible};
use crate::dashboard::App;

/// The most workers the page lists, as `pgbus workers` by default.
const WORKERS_SHOWN: usize = 200;

pub(crate) async fn workers(State(app): State<Arc<App>>) -> Response {
    let threshold = app.settings.lost_worker_threshold;
    let workers = match app.db.client().workers(threshold, WORKERS_SHOWN).await {
        Ok(workers) => workers,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    let threshold = chrono::Duration::from_std(threshold).unwrap_or(chrono::Duration::MAX);
    let body = html! {
        p.cut {
            "Live: a heartbeat within the last " (took(threshold))
            " (the dashboard's --lost-worker-threshold). Digests show their first "
            (SHORT_DIGEST) " characters; hover for the whole."
        }
        @if workers.is_empty() {
            p.empty { "No live workers: nothing claims steps, and every due run waits." }
        } @else {
            table.workers {
                thead { tr {
                    th { "Name" } th { "Host" } th { "Pid" } th { "Queues" } th { "Concurrency" }
                    th { "In flight" } th { "Heartbeat" } th { "Workflows" }
                } }
                tbody {
                    @for worker in &workers {
                        tr {
                            td title=(visible(&worker.id)) { (visible(worker.name.as_deref().unwrap_or(&worker.id))) }
                            td { (visible(&worker.host)) }
                            td { (worker.pid) }
                            td { (visible(&worker.queues.join(", "))) }
                            td { (worker.concurrency.map_or_else(|| "-".to_owned(), |c| c.to_string())) }
                            td { (worker.in_flight) }
                            td { (took(chrono::Duration::from_std(worker.heartbeat_age).unwrap_or(chrono::Duration::MAX))) " ago" }
                            td {
                                @if worker.workflows.is_empty() { "-" }
                                @for (i, w) in worker.workflows.iter().enumerate() {
                                    @if i > 0 { br; }
                                    (visible(&w.workflow)) " "
                                    code title=(w.digest) { (w.digest.chars().take(SHORT_DIGEST).collect::<String>()) }
                                }
                            }
                        }
                    }
                }
            }
            @if workers.len() == WORKERS_SHOWN {
                p.cut { "The first " (WORKERS_SHOWN) " by name; `pgbus workers --limit 1000` lists more." }
            }
        }
    };
    page("Workers", &body).into_response()
}
