//! The schedules page: every schedule with its next and last ticks, as
//! `pgbus schedules list` shows them (read-only: pause and resume are
//! `pgbus schedules pause|resume`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::{error_page, now, page};
use crate::commands::visible;
use crate::dashboard::App;
use crate::dashboard::when::{maybe, when};

/// The most schedules the page lists, as `pgbus schedules list` by default.
const SCHEDULES_SHOWN: usize = 200;

pub(crate) async fn schedules(State(app): State<Arc<App>>) -> Response {
    let listed = match app.db.client().list_schedules(None, SCHEDULES_SHOWN).await {
        Ok(listed) => listed,
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
    let body = html! {
        p.cut {
            "Each tick starts one run, fired by a live worker that registered the workflow. "
            "A next tick in the past means no such worker is running."
        }
        @if listed.is_empty() {
            p.empty { "No schedules." }
        } @else {
            table.schedules {
                thead { tr {
                    th { "Name" } th { "Workflow" } th { "Cron" } th { "Zone" } th { "Catch-up" }
                    th { "Next tick" } th { "Last tick" } th { "Last run" } th { "Skipped" } th { "From" }
                } }
                tbody {
                    @for schedule in &listed {
                        tr {
                            td { (visible(&schedule.name)) }
                            td { (visible(&schedule.workflow)) }
                            td { code { (visible(&schedule.expression)) } }
                            td { (visible(&schedule.timezone)) }
                            td { (visible(&schedule.catch_up)) }
                            td {
                                @if let Some(at) = schedule.paused_at {
                                    span title=(visible(schedule.paused_reason.as_deref().unwrap_or(""))) {
                                        "paused " (when(at, now)) " by " (visible(schedule.paused_by.as_deref().unwrap_or("-")))
                                    }
                                } @else {
                                    (maybe(schedule.next_tick_at, now))
                                }
                            }
                            td { (maybe(schedule.last_tick_at, now)) }
                            td {
                                @match schedule.last_run_id {
                                    Some(run) => a href=(format!("/runs/{run}")) { (run) },
                                    None => "-",
                                }
                            }
                            td { (schedule.ticks_skipped) }
                            td { (schedule.origin.as_str()) }
                        }
                    }
                }
            }
            @if listed.len() == SCHEDULES_SHOWN {
                p.cut { "The first " (SCHEDULES_SHOWN) " by name; `pgbus schedules list --limit 1000` lists more." }
            }
        }
    };
    page("Schedules", &body).into_response()
}
