//! Bulk actions on a filtered runs list (issue 23): a confirmation page that
//! counts the runs the filter matches, the confirming form, and a job that
//! applies the action run by run through the client's own actions, with a
//! page that follows its progress.
//!
//! The confirmed set is the filter's runs between the lowest and the highest
//! id seen at confirmation: a run started later has a higher id and is never
//! touched. The form carries the [`digest`] of the exact ids confirmed; if
//! the same read now finds other runs (even as many), nothing is done and
//! the confirmation is shown again. A form whose action, filter and digest
//! are those of a job running or ended in the last [`RESUBMIT_WITHIN`] is
//! answered with that job's page, so a double submission starts one job.
//! The filter is the runs list's [`ListFilter`], carried whole by the link
//! and the form's hidden fields, so the list, the count and the re-read keep
//! the same runs.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgbus_runtime::view::RunFilter;
use pgbus_runtime::{Client, Error, RunCount, RunId, RunStatus};
use sha2::{Digest as _, Sha256};

use super::run::{REFUSALS, code_of};
use super::runs::{ListFilter, Params, bulk_link};
use super::{error_page, live_page, page};
use crate::dashboard::form::CsrfForm;
use crate::dashboard::when::{maybe, when};
use crate::dashboard::{App, Csrf};

/// The most runs one bulk action takes: past it, the newest this many, and
/// the operator confirms again for the rest.
pub(crate) const BULK_AT_MOST: usize = 1_000;
/// How long a bulk action's job may run; runs it has not reached by then
/// are left as they are, and its page says which.
const BULK_FOR: Duration = Duration::from_mins(10);
/// How many bulk actions the dashboard remembers (their pages), the oldest
/// ended one forgotten first.
const JOBS_KEPT: usize = 32;
/// How many bulk actions may run at once.
const JOBS_RUNNING_AT_MOST: usize = 2;
/// How long after its job ended a form confirming the same runs is still
/// read as a second submission of it, and answered with its page: long
/// enough for a double click, a reload or the back button, short enough
/// that the same action on the same runs later (they were paused again, say)
/// is a new job.
const RESUBMIT_WITHIN: Duration = Duration::from_mins(5);
/// How often a bulk action's page reloads while its job runs.
const PROGRESS_SECS: u32 = 2;
/// How many run links each list of a job's page shows.
const LISTED: usize = 100;

/// The actions a list of runs in `status` may take in bulk: the single-run
/// actions the status allows, but pause (one at a time is the norm there).
pub(crate) fn bulk_actions(status: RunStatus) -> &'static [(&'static str, &'static str)] {
    match status {
        RunStatus::Ready | RunStatus::Performing => &[("cancel", "Cancel these…")],
        RunStatus::Paused => &[
            ("resume", "Resume these…"),
            ("skip", "Skip their steps…"),
            ("cancel", "Cancel these…"),
        ],
        RunStatus::Finished | RunStatus::Cancelled => &[],
    }
}

/// The words of a bulk action: its name, the imperative that opens a
/// sentence, and what its runs are once it is done.
const VERBS: [(&str, &str, &str); 3] = [
    ("cancel", "Cancel", "cancelled"),
    ("resume", "Resume", "resumed"),
    ("skip", "Skip the steps of", "skipped"),
];

/// The imperative and the past of `action` (its own name for both if it is
/// not a bulk action).
fn verb(action: &str) -> (&str, &str) {
    VERBS
        .iter()
        .find(|(name, _, _)| *name == action)
        .map_or((action, action), |(_, imperative, past)| {
            (*imperative, *past)
        })
}

/// "1 run", "4 runs".
fn runs_counted(n: impl std::fmt::Display) -> String {
    let n = n.to_string();
    if n == "1" {
        "1 run".to_owned()
    } else {
        format!("{n} runs")
    }
}

/// The digest of a set of runs, what the confirming form carries: SHA-256
/// over the ids in ascending order, each in decimal followed by a newline,
/// in lowercase hex. Not a secret (the form's CSRF token guards it); it
/// only tells two sets apart, whatever their order.
pub(crate) fn digest(ids: &[RunId]) -> String {
    let mut sorted: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sorted.sort_unstable();
    let mut hasher = Sha256::new();
    for id in sorted {
        hasher.update(format!("{id}\n").as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The bulk actions a dashboard remembers.
#[derive(Debug, Default)]
pub(crate) struct Jobs(Mutex<VecDeque<Arc<Job>>>);

/// One bulk action: what was asked, and how far it got.
#[derive(Debug)]
pub(crate) struct Job {
    id: String,
    action: &'static str,
    filter: ListFilter,
    status: RunStatus,
    actor: String,
    reason: String,
    runs: Vec<RunId>,
    /// The [`digest`] of `runs`, as confirmed.
    digest: String,
    started_at: DateTime<Utc>,
    progress: Mutex<Progress>,
}

/// How far a job got.
#[derive(Debug, Default, Clone)]
struct Progress {
    done: Vec<RunId>,
    /// Runs the engine refused or that failed, by the refusal's code.
    refused: BTreeMap<&'static str, Vec<RunId>>,
    /// Runs not reached before [`BULK_FOR`] ran out.
    not_reached: Vec<RunId>,
    ended_at: Option<DateTime<Utc>>,
}

impl Progress {
    fn reached(&self) -> usize {
        self.done.len() + self.refused.values().map(Vec::len).sum::<usize>()
    }
}

/// What a refused bulk form says on the confirmation page, by its code.
const BULK_REFUSALS: [(&str, &str); 3] = [
    ("actor", "Say who you are."),
    ("reason", "Say why, in at most 10,000 characters."),
    (
        "busy",
        "Other bulk actions are still running; wait for one to end.",
    ),
];

/// A bulk action and the filter it acts on, checked.
struct Asked {
    action: &'static str,
    label: &'static str,
    filter: ListFilter,
    status: RunStatus,
}

impl Asked {
    /// The action and filter a link or a form names, or what the error
    /// page says.
    fn parse(params: &Params) -> Result<Self, String> {
        let filter = ListFilter::parse(params)?;
        let Some(status) = filter.status else {
            return Err(
                "A bulk action acts on the runs of one status: filter the list by status first."
                    .to_owned(),
            );
        };
        let action = params.get("action");
        let Some((action, label)) = bulk_actions(status)
            .iter()
            .find(|(name, _)| Some(*name) == action)
            .copied()
        else {
            let allowed: Vec<&str> = bulk_actions(status).iter().map(|(name, _)| *name).collect();
            return Err(if allowed.is_empty() {
                format!("Runs that are {status} take no bulk action.")
            } else {
                format!(
                    "Runs that are {status} take these bulk actions: {}.",
                    allowed.join(", ")
                )
            });
        };
        Ok(Self {
            action,
            label,
            filter,
            status,
        })
    }

    /// The confirmation page for this action, its filter, and `extra`.
    fn confirm_link(&self, before: Option<i64>, extra: &str) -> String {
        format!("{}{extra}", bulk_link(self.action, &self.filter, before))
    }

    /// The runs the action takes, in words: "the ready runs (top-level, of
    /// workflows starting with `w`)".
    fn describe(&self) -> Markup {
        let filter = self.filter.describe();
        html! {
            "the " (self.status) " runs"
            @if !filter.0.is_empty() { " (" (filter) ")" }
        }
    }
}

/// The ids of the runs of `asked`'s filter with ids below `below` and at
/// least `from`, newest first: at most `cap + 1` of them, so that more than
/// `cap` shows, in pages of the runs list's own read.
async fn matching(
    client: &Client,
    asked: &Asked,
    below: Option<i64>,
    from: Option<i64>,
    cap: usize,
    threshold: Duration,
) -> Result<Vec<RunId>, Error> {
    let mut ids = Vec::new();
    let mut cursor = below;
    let every = asked.filter.run_filter(threshold);
    while ids.len() <= cap {
        let want = u32::try_from((cap + 1 - ids.len()).min(1_000)).unwrap_or(1_000);
        let mut filter = every.clone().limit(want);
        filter.before = cursor.map(RunId);
        let page = client.list_runs(&filter).await?;
        let full = page.len() == want as usize;
        for run in &page {
            if from.is_some_and(|from| run.id.0 < from) {
                return Ok(ids);
            }
            ids.push(run.id);
        }
        match page.last() {
            Some(last) if full => cursor = Some(last.id.0),
            _ => break,
        }
    }
    Ok(ids)
}

/// `GET /bulk`: how many runs the action would take, and the form that
/// confirms it.
pub(crate) async fn bulk_confirm(
    State(app): State<Arc<App>>,
    Query(pairs): Query<Vec<(String, String)>>,
    Extension(csrf): Extension<Csrf>,
) -> Response {
    let params = Params(pairs);
    let asked = match Asked::parse(&params) {
        Ok(asked) => asked,
        Err(refused) => return error_page(StatusCode::BAD_REQUEST, &refused),
    };
    let (before, was) = match (params.number("before"), params.number("was")) {
        (Ok(before), Ok(was)) => (before, was),
        (Err(refused), _) | (_, Err(refused)) => {
            return error_page(StatusCode::BAD_REQUEST, &refused);
        }
    };
    let client = app.db.client();
    let threshold = app.settings.lost_worker_threshold;
    let ids = match matching(&client, &asked, before, None, BULK_AT_MOST, threshold).await {
        Ok(ids) => ids,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    // Every run the filter keeps from this page on, counted (the set acted
    // on stops at `BULK_AT_MOST`).
    let mut every = asked.filter.run_filter(threshold);
    every.before = before.map(RunId);
    let count = if ids.len() > BULK_AT_MOST || asked.filter.path.is_some() {
        match client.count_runs(&every, RunCount::MAX_CAP).await {
            Ok(count) => Some(count),
            Err(error) => {
                return error_page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &crate::commands::chain(&error),
                );
            }
        }
    } else {
        None
    };
    let notice = (params.get("error"), was);
    let body = confirm_body(&asked, &ids, count, before, notice, &csrf);
    page(&format!("Bulk {}", asked.action), &body).into_response()
}

/// The confirmation: what the action takes (`ids`, newest first, one more
/// than [`BULK_AT_MOST`] when there are more; `count`, all of them, when
/// counted), from `before` on, the form that confirms it, and the `notice`
/// of a refused form (its code, and the count it confirmed).
fn confirm_body(
    asked: &Asked,
    ids: &[RunId],
    count: Option<RunCount>,
    before: Option<i64>,
    notice: (Option<&str>, Option<i64>),
    csrf: &Csrf,
) -> Markup {
    let more = ids.len() > BULK_AT_MOST;
    let set = &ids[..ids.len().min(BULK_AT_MOST)];
    let mut back = asked.filter.params();
    if let Some(before) = before {
        back.push(("before", before.to_string()));
    }
    let back = format!(
        "{}?{}",
        super::runs::LIST,
        serde_urlencoded::to_string(&back).unwrap_or_default()
    );
    html! {
        @if notice.0 == Some("changed") {
            p.notice.error {
                "The runs changed since you confirmed"
                @if let Some(was) = notice.1 { " " (runs_counted(was)) }
                ": nothing was done. Here they are as they are now; confirm again."
            }
        }
        @if let Some((_, text)) = notice.0.and_then(|e| BULK_REFUSALS.iter().find(|(code, _)| *code == e)) {
            p.notice.error { (text) }
        }
        @match (set.first(), set.last()) {
            (Some(upto), Some(from)) => {
                p.count {
                    @if more {
                        strong { (count.map_or_else(|| format!("more than {BULK_AT_MOST}"), |c| c.to_string())) " runs" }
                        " match: " (asked.describe()) ". This acts on the " (BULK_AT_MOST)
                        " newest of them (runs " (from.0) " to " (upto.0)
                        "); confirm again afterwards for the rest."
                    } @else {
                        strong { (runs_counted(set.len())) }
                        @if set.len() == 1 { " matches: " } @else { " match: " }
                        (asked.describe())
                        @if set.len() == 1 { ", run " (from.0) "." } @else { ", runs " (from.0) " to " (upto.0) "." }
                    }
                }
                @if matches!(count, Some(RunCount::AtLeast(_))) {
                    p.cut {
                        "The input path was tried on " (RunFilter::INPUT_SCAN) " runs only: older "
                        "runs it may match are not counted, nor acted on."
                    }
                }
                p.cut {
                    "Runs started after this page are left alone. Each run is acted on "
                    "by itself, recorded with your name and reason; one the engine refuses "
                    "(it moved on meanwhile) is listed, not retried."
                }
                p.runs {
                    @for (i, id) in set.iter().take(20).enumerate() {
                        @if i > 0 { ", " }
                        a href=(format!("/runs/{}", id.0)) { (id.0) }
                    }
                    @if set.len() > 20 { ", …" }
                }
                form method="post" action="/bulk" class=(format!("act bulk {}", asked.action)) {
                    input type="hidden" name="csrf" value=(csrf.0);
                    input type="hidden" name="action" value=(asked.action);
                    @for (name, value) in asked.filter.params() {
                        input type="hidden" name=(name) value=(value);
                    }
                    input type="hidden" name="from" value=(from.0);
                    input type="hidden" name="upto" value=(upto.0);
                    input type="hidden" name="expected" value=(set.len());
                    input type="hidden" name="digest" value=(digest(set));
                    input name="actor" placeholder="your name" required maxlength="200";
                    input name="reason" placeholder="why" required maxlength="10000";
                    button type="submit" { (asked.label.trim_end_matches('…')) " " (set.len()) " runs" }
                }
            }
            _ => { p.empty { "No runs match: nothing to " (asked.action) "." } }
        }
        p { a href=(back) { "← Back to the runs" } }
    }
}

/// `POST /bulk`: the confirmed set read again, with the filter its hidden
/// fields carry (every field of [`ListFilter`]) and `from`, `upto` (the
/// lowest and highest id confirmed), `expected` (how many runs the
/// confirmation counted, for its notice) and `digest` (the [`digest`] of
/// the runs confirmed); if the set read again has that digest, a job acts
/// on it run by run, and the answer is its page. A form a job already
/// answers (the same action, filter and digest, running or ended in the
/// last [`RESUBMIT_WITHIN`]) is answered with that job's page.
pub(crate) async fn bulk_apply(
    State(app): State<Arc<App>>,
    CsrfForm(pairs): CsrfForm<Vec<(String, String)>>,
) -> Response {
    let form = Params(pairs);
    let asked = match Asked::parse(&form) {
        Ok(asked) => asked,
        Err(refused) => return error_page(StatusCode::BAD_REQUEST, &refused),
    };
    let numbers = (
        form.number("from"),
        form.number("upto"),
        form.number("expected"),
    );
    let (Ok(Some(from)), Ok(Some(upto)), Ok(Some(expected)), Some(confirmed)) =
        (numbers.0, numbers.1, numbers.2, form.get("digest"))
    else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "This form is incomplete: it names the runs confirmed (`from`, `upto`, \
             `expected`, `digest`).",
        );
    };
    let again =
        |extra: &str| Redirect::to(&asked.confirm_link(upto.checked_add(1), extra)).into_response();
    // A second submission of a form a job took: its runs have moved on (the
    // read below would call them changed), and the job is what the operator
    // asked for.
    if let Some(job) = app.jobs.same(&asked, confirmed) {
        return Redirect::to(&format!("/bulk/{}", job.id)).into_response();
    }
    let actor = form.get("actor").unwrap_or_default();
    let reason = form.get("reason").unwrap_or_default();
    if actor.is_empty() {
        return again("&error=actor");
    }
    if pgbus_runtime::client::check_reason(reason).is_err() {
        return again("&error=reason");
    }
    let client = app.db.client();
    let threshold = app.settings.lost_worker_threshold;
    let ids = match matching(
        &client,
        &asked,
        upto.checked_add(1),
        Some(from),
        BULK_AT_MOST,
        threshold,
    )
    .await
    {
        Ok(ids) => ids,
        Err(error) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::commands::chain(&error),
            );
        }
    };
    if ids.is_empty() {
        return again("");
    }
    // The same runs, not only as many: one that left the status and another
    // that entered it keep the count and change the set.
    let digest = digest(&ids);
    if digest != confirmed {
        return again(&format!("&error=changed&was={expected}"));
    }
    let job = Arc::new(Job {
        id: uuid::Uuid::new_v4().simple().to_string(),
        action: asked.action,
        filter: asked.filter.clone(),
        status: asked.status,
        actor: format!("dashboard:{actor}"),
        reason: reason.to_owned(),
        runs: ids,
        digest,
        started_at: Utc::now(),
        progress: Mutex::new(Progress::default()),
    });
    match app.jobs.admit(&job) {
        Admitted::Busy => again("&error=busy"),
        // Submitted twice at once: both read the same runs, one job takes them.
        Admitted::Same(other) => Redirect::to(&format!("/bulk/{}", other.id)).into_response(),
        Admitted::Yes => {
            tokio::spawn(apply(client, Arc::clone(&job)));
            Redirect::to(&format!("/bulk/{}", job.id)).into_response()
        }
    }
}

/// What [`Jobs::admit`] made of a job.
enum Admitted {
    /// Kept: it is to run.
    Yes,
    /// Another job, running or recently ended, is for the same runs.
    Same(Arc<Job>),
    /// Too many are running.
    Busy,
}

impl Jobs {
    /// Keeps `job`, unless a job for the same runs is running or ended in
    /// the last [`RESUBMIT_WITHIN`] (checked under the same lock, so two
    /// submissions at once keep one), or [`JOBS_RUNNING_AT_MOST`] are
    /// running; forgets the oldest ended job past [`JOBS_KEPT`].
    fn admit(&self, job: &Arc<Job>) -> Admitted {
        let Ok(mut jobs) = self.0.lock() else {
            return Admitted::Busy;
        };
        if let Some(same) = Self::find_same(&jobs, job.action, &job.filter, &job.digest) {
            return Admitted::Same(same);
        }
        let running = jobs.iter().filter(|j| !j.ended()).count();
        if running >= JOBS_RUNNING_AT_MOST {
            return Admitted::Busy;
        }
        while jobs.len() >= JOBS_KEPT {
            match jobs.iter().position(|j| j.ended()) {
                Some(oldest) => {
                    jobs.remove(oldest);
                }
                None => return Admitted::Busy,
            }
        }
        jobs.push_back(Arc::clone(job));
        Admitted::Yes
    }

    /// The job, running or ended in the last [`RESUBMIT_WITHIN`], that
    /// `asked` with the runs of `digest` would repeat.
    fn same(&self, asked: &Asked, digest: &str) -> Option<Arc<Job>> {
        let jobs = self.0.lock().ok()?;
        Self::find_same(&jobs, asked.action, &asked.filter, digest)
    }

    fn find_same(
        jobs: &VecDeque<Arc<Job>>,
        action: &str,
        filter: &ListFilter,
        digest: &str,
    ) -> Option<Arc<Job>> {
        let now = Utc::now();
        let within = chrono::Duration::from_std(RESUBMIT_WITHIN).unwrap_or_default();
        jobs.iter()
            .rev()
            .find(|j| {
                j.action == action
                    && j.filter == *filter
                    && j.digest == digest
                    && j.progress()
                        .ended_at
                        .is_none_or(|ended| now - ended < within)
            })
            .cloned()
    }

    fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.0.lock().ok()?.iter().find(|j| j.id == id).cloned()
    }
}

impl Job {
    fn progress(&self) -> Progress {
        self.progress.lock().map(|p| p.clone()).unwrap_or_default()
    }

    fn ended(&self) -> bool {
        self.progress().ended_at.is_some()
    }

    fn record(&self, change: impl FnOnce(&mut Progress)) {
        if let Ok(mut progress) = self.progress.lock() {
            change(&mut progress);
        }
    }
}

/// The job: the action on each run in turn, oldest first, until the runs or
/// [`BULK_FOR`] run out.
async fn apply(client: Client, job: Arc<Job>) {
    let deadline = tokio::time::Instant::now() + BULK_FOR;
    for (i, &run) in job.runs.iter().rev().enumerate() {
        let acted = tokio::time::timeout_at(deadline, async {
            match job.action {
                "resume" => client.resume(run, &job.actor, &job.reason).await,
                "skip" => client.skip(run, &job.actor, &job.reason).await,
                _ => client.cancel(run, &job.actor, &job.reason).await,
            }
        })
        .await;
        match acted {
            Ok(Ok(_)) => job.record(|p| p.done.push(run)),
            Ok(Err(error)) => {
                job.record(|p| p.refused.entry(code_of(&error)).or_default().push(run));
            }
            Err(_) => {
                let left: Vec<RunId> = job.runs.iter().rev().skip(i).copied().collect();
                job.record(|p| p.not_reached = left);
                break;
            }
        }
    }
    job.record(|p| p.ended_at = Some(Utc::now()));
}

/// `GET /bulk/{job}`: how far a bulk action got; reloads itself until it
/// ends.
pub(crate) async fn bulk_progress(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let Some(job) = app.jobs.get(&id) else {
        return error_page(
            StatusCode::NOT_FOUND,
            &format!(
                "No such bulk action: the dashboard remembers its last {JOBS_KEPT} since it started."
            ),
        );
    };
    let progress = job.progress();
    // Server time throughout this page: its times are the job's, taken on
    // this host's clock.
    let now = Utc::now();
    let runs = |ids: &[RunId]| {
        html! {
            @for (i, id) in ids.iter().take(LISTED).enumerate() {
                @if i > 0 { ", " }
                a href=(format!("/runs/{}", id.0)) { (id.0) }
            }
            @if ids.len() > LISTED { ", and " (ids.len() - LISTED) " more" }
        }
    };
    let asked = Asked {
        action: job.action,
        label: "",
        filter: job.filter.clone(),
        status: job.status,
    };
    let body = html! {
        p { (verb(job.action).0) " " (asked.describe()) ", by " code { (job.actor) } ": " (job.reason) }
        dl.facts {
            dt { "Started" } dd { (when(job.started_at, now)) }
            dt { "Ended" } dd { (maybe(progress.ended_at, now)) }
            dt { "Progress" } dd.progress { (progress.reached()) " of " (job.runs.len()) " runs" }
        }
        @if progress.ended_at.is_some() {
            p.notice.done {
                "Done: " (progress.done.len()) " of " (runs_counted(job.runs.len())) " "
                (verb(job.action).1) "."
            }
        } @else {
            p.notice { "Running; this page follows it." }
        }
        @if !progress.done.is_empty() {
            section { h2 { "Done (" (progress.done.len()) ")" } p.runs { (runs(&progress.done)) } }
        }
        @for (code, ids) in &progress.refused {
            section.refused {
                h2 { "Refused (" (ids.len()) ")" }
                p.notice.error { (REFUSALS.iter().find(|(c, _)| c == code).map_or(*code, |(_, text)| *text)) }
                p.runs { (runs(ids)) }
            }
        }
        @if !progress.not_reached.is_empty() {
            section {
                h2 { "Not reached (" (progress.not_reached.len()) ")" }
                p.notice.error { "The action stopped after " (crate::commands::took(chrono::Duration::from_std(BULK_FOR).unwrap_or_default())) "; these runs were left as they were." }
                p.runs { (runs(&progress.not_reached)) }
            }
        }
    };
    let title = format!("Bulk {}", job.action);
    if progress.ended_at.is_some() {
        page(&title, &body).into_response()
    } else {
        live_page(&title, &body, PROGRESS_SECS).into_response()
    }
}

#[cfg(test)]
mod tests;
