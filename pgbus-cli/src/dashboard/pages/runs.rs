//! The runs list (issue 23): top-level runs by default, each with how many
//! children its fan-out batches hold (a link to them); filters by workflow
//! prefix (the known names offered), status, creation time and one search
//! box (a run id, an idempotency key, or an SQL/JSON path on the input);
//! pages newer and older; the bulk actions of its filter.
//!
//! [`ListFilter`] is the one description of "the runs this list shows": its
//! links, the bulk confirmation's link and the bulk form's hidden fields
//! all carry it as [`ListFilter::params`] and read it back with
//! [`ListFilter::parse`], so the list, the confirmation's count and the
//! confirmed re-read keep the same [`RunFilter`].

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use maud::{Markup, html};
use pgbus_runtime::view::{RunFilter, RunSummary};
use pgbus_runtime::{Error, RunCount, RunId, RunRead, RunStatus};

use super::{REFRESH_SECS, bulk, error_page, live_page, now, page, status_badge, stuck_badge};
use crate::dashboard::App;
use crate::dashboard::when::when;

/// The runs list's address.
pub(crate) const LIST: &str = "/runs";

/// How many runs a page of the list shows.
const PAGE: u32 = 50;

/// A query string or a form, as its name and value pairs.
#[derive(Debug, Default)]
pub(crate) struct Params(pub(crate) Vec<(String, String)>);

impl Params {
    /// The first value of `name`, trimmed, if not empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value of `name` as a number, if given; else what the error
    /// page says.
    pub(crate) fn number(&self, name: &str) -> Result<Option<i64>, String> {
        self.get(name)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("`{name}` is a whole number."))
            })
            .transpose()
    }
}

/// Which runs the list shows (the page aside): what its links and the bulk
/// forms carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListFilter {
    /// Runs of workflows whose name starts with this.
    pub(crate) prefix: Option<String>,
    /// The workflow's name is `prefix` exactly (the overview's links: a
    /// count of `orders` is not a list of `orders_v2` too).
    pub(crate) exact: bool,
    pub(crate) status: Option<RunStatus>,
    /// Child runs too (the list is of top-level runs without it).
    pub(crate) children: bool,
    /// Only the children of this run.
    pub(crate) parent: Option<RunId>,
    /// Only the runs started with this idempotency key.
    pub(crate) key: Option<String>,
    /// Only runs whose input matches this SQL/JSON path.
    pub(crate) path: Option<String>,
    pub(crate) created_after: Option<DateTime<Utc>>,
    pub(crate) created_before: Option<DateTime<Utc>>,
}

impl ListFilter {
    /// The filter `params` names, or what the error page says.
    pub(crate) fn parse(params: &Params) -> Result<Self, String> {
        let text = |name: &str| -> Result<Option<String>, String> {
            match params.get(name) {
                Some(v) if v.contains('\0') => Err(format!("`{name}` has no NUL characters.")),
                v => Ok(v.map(str::to_owned)),
            }
        };
        Ok(Self {
            prefix: text("workflow")?,
            exact: params.get("exact").is_some_and(|v| v != "0"),
            status: super::parse_status(params.get("status"))?,
            children: params.get("children").is_some_and(|v| v != "0"),
            parent: params.number("parent")?.map(RunId),
            key: text("key")?,
            path: text("path")?,
            created_after: params.get("created_after").map(parse_time).transpose()?,
            created_before: params.get("created_before").map(parse_time).transpose()?,
        })
    }

    /// Its fields as a query string or a form carries them, in a fixed
    /// order; times to the microsecond, as stored.
    pub(crate) fn params(&self) -> Vec<(&'static str, String)> {
        let time = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let mut params = Vec::new();
        let mut push = |name, value: Option<String>| {
            if let Some(value) = value {
                params.push((name, value));
            }
        };
        push("workflow", self.prefix.clone());
        push(
            "exact",
            (self.exact && self.prefix.is_some()).then(|| "1".to_owned()),
        );
        push("status", self.status.map(|s| s.as_str().to_owned()));
        push("children", self.children.then(|| "1".to_owned()));
        push("parent", self.parent.map(|p| p.0.to_string()));
        push("key", self.key.clone());
        push("path", self.path.clone());
        push("created_after", self.created_after.map(time));
        push("created_before", self.created_before.map(time));
        params
    }

    /// Top-level runs only: unless child runs are asked for, or the
    /// children of one run (never top-level).
    fn top_level(&self) -> bool {
        !self.children && self.parent.is_none()
    }

    /// The runtime's filter, every page of it.
    pub(crate) fn run_filter(&self, threshold: std::time::Duration) -> RunFilter {
        let mut filter = RunFilter::new().lost_worker_threshold(threshold);
        if self.exact {
            filter.workflow.clone_from(&self.prefix);
        } else {
            filter.workflow_prefix.clone_from(&self.prefix);
        }
        filter.status = self.status;
        filter.top_level = self.top_level();
        filter.parent = self.parent;
        filter.idempotency_key.clone_from(&self.key);
        filter.input_path.clone_from(&self.path);
        filter.created_after = self.created_after;
        filter.created_before = self.created_before;
        filter
    }

    /// What it keeps, in words: "top-level, of workflows starting with
    /// `orders.`, created at or after …".
    pub(crate) fn describe(&self) -> Markup {
        let visible = crate::commands::visible;
        let mut parts: Vec<Markup> = Vec::new();
        if self.top_level() {
            parts.push(html! { "top-level" });
        }
        if let Some(parent) = self.parent {
            parts.push(html! { "children of run " (parent.0) });
        }
        match &self.prefix {
            Some(name) if self.exact => {
                parts.push(html! { "of workflow " code { (visible(name)) } });
            }
            Some(prefix) => {
                parts.push(html! { "of workflows starting with " code { (visible(prefix)) } });
            }
            None => {}
        }
        if let Some(key) = &self.key {
            parts.push(html! { "with idempotency key " code { (visible(key)) } });
        }
        if let Some(path) = &self.path {
            parts.push(html! { "whose input matches " code { (visible(path)) } });
        }
        if let Some(at) = self.created_after {
            parts.push(html! { "created at or after " (crate::commands::time(at)) });
        }
        if let Some(at) = self.created_before {
            parts.push(html! { "created before " (crate::commands::time(at)) });
        }
        html! {
            @for (i, part) in parts.iter().enumerate() {
                @if i > 0 { ", " }
                (part)
            }
        }
    }
}

/// A time a filter names: RFC 3339, or `2026-12-03T11:57` (to the minute
/// or the second, as a `datetime-local` field gives it) read as UTC.
fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .or_else(|_| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
                .iter()
                .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
                .map(|at| at.and_utc())
                .ok_or(())
        })
        .map_err(|()| {
            "A time reads like 2026-12-03T11:57 (UTC) or 2026-12-03T11:57:00+01:00.".to_owned()
        })
}

/// `path` with `params` as its query string.
fn with_query(path: &str, params: &[(&str, String)]) -> String {
    let query = serde_urlencoded::to_string(params).unwrap_or_default();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// Where a page of the list starts.
#[derive(Debug, Clone, Copy)]
enum Cursor {
    Newest,
    Before(i64),
    After(i64),
}

/// The list with `filter`, the sliding window `within` (`1h`: the last
/// hour, read at each load) and from `cursor` on.
fn list_link(filter: &ListFilter, within: Option<&str>, cursor: Cursor) -> String {
    let mut params = filter.params();
    if let Some(within) = within {
        params.push(("within", within.to_owned()));
    }
    match cursor {
        Cursor::Newest => {}
        Cursor::Before(id) => params.push(("before", id.to_string())),
        Cursor::After(id) => params.push(("after", id.to_string())),
    }
    with_query(LIST, &params)
}

/// The list of the children of `run`.
pub(crate) fn children_link(run: RunId) -> String {
    list_link(
        &ListFilter {
            parent: Some(run),
            ..ListFilter::default()
        },
        None,
        Cursor::Newest,
    )
}

/// The confirmation page of a bulk `action` on `filter` (its times
/// absolute: a confirmation counts what the list showed, not a window
/// that slid since), older than `before` if given.
pub(crate) fn bulk_link(action: &str, filter: &ListFilter, before: Option<i64>) -> String {
    let mut params = vec![("action", action.to_owned())];
    params.extend(filter.params());
    if let Some(before) = before {
        params.push(("before", before.to_string()));
    }
    with_query("/bulk", &params)
}

/// What the search box's text asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Search {
    /// Digits: the run of that id, if there is one (else its idempotency
    /// key).
    Run(i64),
    /// `$…`: an SQL/JSON path on the input.
    Path(String),
    /// Anything else: an idempotency key.
    Key(String),
}

impl Search {
    fn of(text: &str) -> Self {
        if text.starts_with('$') {
            return Self::Path(text.to_owned());
        }
        match text.parse::<i64>() {
            Ok(id) if text.bytes().all(|b| b.is_ascii_digit()) => Self::Run(id),
            _ => Self::Key(text.to_owned()),
        }
    }
}

/// The list's page and what it says beside the runs.
struct Listed {
    runs: Vec<RunSummary>,
    /// The input path PostgreSQL did not read, and why.
    bad_path: Option<String>,
    /// The path was tried on [`RunFilter::INPUT_SCAN`] runs and older
    /// ones were left untried.
    scan_bounded: bool,
}

/// The search box's text (`q`) as the filter it asks for, put in `params`:
/// a key or a path, or, for the id of a run that exists, `Err` with that id
/// (the page goes there). `Ok(Some(id))`: digits no run has, read as a key.
async fn search(
    client: &pgbus_runtime::Client,
    params: &mut Params,
) -> Result<Result<Option<i64>, i64>, Error> {
    let Some(text) = params.get("q").map(str::to_owned) else {
        return Ok(Ok(None));
    };
    let mut no_run = None;
    let (name, value) = match Search::of(&text) {
        Search::Run(id) => {
            match client
                .run_with(RunId(id), RunRead::latest(1).value_bytes(0))
                .await
            {
                Ok(_) => return Ok(Err(id)),
                Err(Error::RunNotFound { .. }) => {
                    no_run = Some(id);
                    ("key", text)
                }
                Err(error) => return Err(error),
            }
        }
        Search::Path(path) => ("path", path),
        Search::Key(key) => ("key", key),
    };
    params.0.retain(|(n, _)| n != "key" && n != "path");
    // A key names one run, wherever it sits in a family: a child's key
    // finds the child, not an empty top-level list.
    if name == "key" && params.get("children").is_none() {
        params.0.push(("children".to_owned(), "1".to_owned()));
    }
    params.0.push((name.to_owned(), value));
    Ok(Ok(no_run))
}

/// The page for a failed read.
fn internal(error: &Error) -> Response {
    error_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        &crate::commands::chain(error),
    )
}

pub(crate) async fn runs(
    State(app): State<Arc<App>>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let mut params = Params(pairs);
    let client = app.db.client();
    let no_run = match search(&client, &mut params).await {
        Ok(Ok(no_run)) => no_run,
        Ok(Err(run)) => return Redirect::to(&format!("/runs/{run}")).into_response(),
        Err(error) => return internal(&error),
    };
    let filter = match ListFilter::parse(&params) {
        Ok(filter) => filter,
        Err(refused) => return error_page(StatusCode::BAD_REQUEST, &refused),
    };
    let cursor = match (params.number("before"), params.number("after")) {
        (Ok(Some(before)), _) => Cursor::Before(before),
        (Ok(None), Ok(Some(after))) => Cursor::After(after),
        (Ok(None), Ok(None)) => Cursor::Newest,
        (Err(refused), _) | (_, Err(refused)) => {
            return error_page(StatusCode::BAD_REQUEST, &refused);
        }
    };
    let within = params.get("within").map(str::to_owned);
    let window = match within.as_deref().map(pgbus_runtime::parse_duration_ms) {
        None => None,
        Some(Ok(ms)) => Some(chrono::Duration::milliseconds(
            i64::try_from(ms).unwrap_or(i64::MAX),
        )),
        Some(Err(_)) => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "`within` is a duration, like 1h, 1d or 7d.",
            );
        }
    };
    let now = match now(&app).await {
        Ok(now) => now,
        Err(error) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &error),
    };
    // The window, read now: what this page, and a bulk action from it, keep.
    let mut applied = filter.clone();
    if let Some(window) = window {
        applied.created_after = Some(now - window);
    }
    let listed = match read(&app, &applied, cursor).await {
        Ok(listed) => listed,
        Err(error) => return internal(&error),
    };
    let workflows = match client.workflows().await {
        Ok(names) => names,
        Err(error) => return internal(&error),
    };
    let searched = params
        .get("q")
        .map(str::to_owned)
        .or_else(|| filter.key.clone().or_else(|| filter.path.clone()));
    let body = html! {
        (filters(&filter, within.as_deref(), searched.as_deref(), &workflows))
        @if let Some(parent) = filter.parent {
            p.scope {
                "The runs the fan-out batches of " a href=(format!("/runs/{}", parent.0)) { "run " (parent.0) } " started. "
                a href=(list_link(&ListFilter { parent: None, ..filter.clone() }, within.as_deref(), Cursor::Newest)) { "All runs" }
            }
        }
        @if let Some(id) = no_run {
            p.notice { "There is no run " (id) "; these are the runs with idempotency key " code { (id) } "." }
        }
        @if let Some(error) = &listed.bad_path {
            p.notice.error { (error) }
        }
        @if listed.scan_bounded {
            p.notice {
                "The input path was tried on " (RunFilter::INPUT_SCAN) " runs (the newest the other filters keep, from where this page starts); older runs were not looked at. Narrow by workflow or time, or page on."
            }
        }
        (table(&listed.runs, !filter.top_level(), now))
        (bulk_offer(&applied, &listed.runs, cursor))
        (pager(&filter, within.as_deref(), cursor, &listed.runs))
    };
    let title = match filter.parent {
        Some(parent) => format!("Children of run {}", parent.0),
        None => "Runs".to_owned(),
    };
    // A search of the inputs reads up to `INPUT_SCAN` runs: drawn once,
    // not again every few seconds.
    if filter.path.is_some() {
        page(&title, &body).into_response()
    } else {
        live_page(&title, &body, REFRESH_SECS).into_response()
    }
}

/// The page of `filter` from `cursor`, and, with an input path, whether its
/// scan stopped at its bound.
async fn read(app: &App, filter: &ListFilter, cursor: Cursor) -> Result<Listed, Error> {
    let client = app.db.client();
    let mut wanted = filter
        .run_filter(app.settings.lost_worker_threshold)
        .limit(PAGE);
    match cursor {
        Cursor::Newest => {}
        Cursor::Before(id) => wanted.before = Some(RunId(id)),
        Cursor::After(id) => wanted.after = Some(RunId(id)),
    }
    let runs = match client.list_runs(&wanted).await {
        Ok(runs) => runs,
        Err(error @ Error::InvalidInputPath { .. }) => {
            return Ok(Listed {
                runs: Vec::new(),
                bad_path: Some(error.to_string()),
                scan_bounded: false,
            });
        }
        Err(error) => return Err(error),
    };
    // A short page of a path search: did the scan stop at its bound? The
    // runs it could have read, counted without the path, say.
    let mut scan_bounded = false;
    if wanted.input_path.is_some() && runs.len() < PAGE as usize {
        let mut unpathed = wanted.clone();
        unpathed.input_path = None;
        let cap = u32::try_from(RunFilter::INPUT_SCAN - 1).unwrap_or(u32::MAX);
        scan_bounded = matches!(
            client.count_runs(&unpathed, cap).await?,
            RunCount::MoreThan(_)
        );
    }
    Ok(Listed {
        runs,
        bad_path: None,
        scan_bounded,
    })
}

/// The filters' form: the workflow prefix with the known names offered,
/// the status, the creation time, the search box and the children switch.
fn filters(
    filter: &ListFilter,
    within: Option<&str>,
    searched: Option<&str>,
    workflows: &[String],
) -> Markup {
    let time = |at: Option<DateTime<Utc>>| at.map(crate::commands::time).unwrap_or_default();
    html! {
        form.filters method="get" action=(LIST) {
            label { "Workflow " input name="workflow" list="workflows" placeholder="name or its start" value=(filter.prefix.clone().unwrap_or_default()); }
            datalist #workflows {
                @for name in workflows { option value=(name) {} }
            }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in RunStatus::ALL {
                        option value=(s.as_str()) selected[filter.status == Some(*s)] { (s.as_str()) }
                    }
                }
            }
            label { "Created "
                select name="within" {
                    option value="" { "any time" }
                    @for (value, label) in [("1h", "in the last hour"), ("1d", "in the last day"), ("7d", "in the last week")] {
                        option value=(value) selected[within == Some(value)] { (label) }
                    }
                    @if let Some(other) = within.filter(|w| !["1h", "1d", "7d"].contains(w)) {
                        option value=(other) selected { "in the last " (other) }
                    }
                }
            }
            label { "after " input name="created_after" size="22" placeholder="2026-12-03T11:57Z" value=(time(filter.created_after)); }
            label { "before " input name="created_before" size="22" placeholder="2026-12-03T12:57Z" value=(time(filter.created_before)); }
            label { "Search " input type="search" name="q" size="28" placeholder="run id, idempotency key or $.input.path" value=(searched.unwrap_or_default()); }
            @if let Some(parent) = filter.parent {
                input type="hidden" name="parent" value=(parent.0);
            } @else {
                label { input type="checkbox" name="children" value="1" checked[filter.children]; " show children too" }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The runs, each with its children (a link to them) and, when child runs
/// are shown, its parent.
fn table(runs: &[RunSummary], with_parents: bool, now: DateTime<Utc>) -> Markup {
    html! {
        @if runs.is_empty() {
            p.empty { "No runs match." }
        } @else {
            table.runs {
                thead { tr {
                    th { "Run" } th { "Workflow" } th { "Status" } th { "Step" } th { "Children" }
                    @if with_parents { th { "Parent" } }
                    th { "Created" } th { "Updated" }
                } }
                tbody {
                    @for run in runs {
                        tr {
                            td { a href=(format!("/runs/{}", run.id.0)) { (run.id.0) } }
                            td { (crate::commands::visible(&run.workflow)) }
                            td {
                                (status_badge(run.status))
                                @if let Some(missing) = run.unrunnable { (stuck_badge(missing)) }
                            }
                            td { (crate::commands::visible(run.current_step.as_deref().unwrap_or("-"))) }
                            td.children {
                                @if run.children > 0 {
                                    a href=(children_link(run.id)) { (run.children) }
                                } @else { "-" }
                            }
                            @if with_parents {
                                td.parent { @match run.parent_run {
                                    Some(parent) => a href=(format!("/runs/{}", parent.0)) { (parent.0) },
                                    None => "-",
                                } }
                            }
                            td { (when(run.created_at, now)) }
                            td { (when(run.updated_at, now)) }
                        }
                    }
                }
            }
        }
    }
}

/// The bulk actions the status filter allows, on every run the filter
/// keeps from this page on.
fn bulk_offer(applied: &ListFilter, runs: &[RunSummary], cursor: Cursor) -> Markup {
    let before = match cursor {
        Cursor::Before(id) => Some(id),
        _ => None,
    };
    html! {
        @if let Some(status) = applied.status.filter(|_| !runs.is_empty()) {
            @let actions = bulk::bulk_actions(status);
            @if !actions.is_empty() {
                p.bulk {
                    "All the runs this filter matches: "
                    @for (action, label) in actions {
                        a.bulk href=(bulk_link(action, applied, before)) { (label) } " "
                    }
                }
            }
        }
    }
}

/// The links to the newest page, the newer one and the older one, each
/// with every filter.
fn pager(filter: &ListFilter, within: Option<&str>, cursor: Cursor, runs: &[RunSummary]) -> Markup {
    let full = runs.len() == PAGE as usize;
    let (first, last) = (runs.first().map(|r| r.id.0), runs.last().map(|r| r.id.0));
    // Newer: from the newest run shown, or, on an empty page, from its start.
    let newer = match cursor {
        Cursor::Newest => None,
        Cursor::Before(before) => Some(first.unwrap_or(before.saturating_sub(1))),
        Cursor::After(after) => full.then(|| first.unwrap_or(after)),
    };
    let older = match cursor {
        Cursor::After(after) => Some(last.unwrap_or(after.saturating_add(1))),
        _ => last.filter(|_| full),
    };
    html! {
        p.pager {
            @if !matches!(cursor, Cursor::Newest) {
                a.newest href=(list_link(filter, within, Cursor::Newest)) { "← Newest runs" } " "
            }
            @if let Some(after) = newer {
                a.newer href=(list_link(filter, within, Cursor::After(after))) { "← Newer runs" } " "
            }
            @if let Some(before) = older {
                a.next href=(list_link(filter, within, Cursor::Before(before))) { "Older runs →" }
            }
        }
    }
}

#[cfg(test)]
mod tests;
