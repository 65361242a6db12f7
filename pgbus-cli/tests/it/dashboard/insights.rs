//! The insights page (issue 23): a window that fits the data when none is
//! asked for, and why; a workflow prefix with the known names offered;
//! failed attempts marked and totalled. The runs are seeded on a clock
//! pinned three days back, so the newest activity is three days old.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, Database, ManualClock};

use super::http;
use crate::common::{Dashboard, TestSchema};

/// What `Alpha::only` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Mode {
    Ok,
    /// An error; the workflow's policy pauses the run.
    Broken,
}

struct Alpha;

#[workflow(name = "insights.alpha", input = Mode, on_exception(action = "pause"))]
impl Alpha {
    #[step]
    async fn only(&self, cx: &mut StepCx<Mode>) -> StepResult {
        match cx.input() {
            Mode::Ok => Ok(Flow::Complete),
            Mode::Broken => Err(StepError::msg("broken")),
        }
    }
}

struct Beta;

#[workflow(name = "insights.beta")]
impl Beta {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// Two alpha runs (one paused on its error) and a beta run, three days
/// back.
async fn seed(t: &TestSchema) {
    let clock = ManualClock::new(chrono::Utc::now() - chrono::TimeDelta::days(3));
    let pinned = Database::connect_with(
        t.database.url(),
        t.db.schema().clone(),
        Clock::Manual(clock),
    )
    .await
    .expect("connect");
    let client = pinned.client();
    client.start::<Alpha>(&Mode::Ok).await.expect("start");
    client.start::<Alpha>(&Mode::Broken).await.expect("start");
    client.start::<Beta>(&()).await.expect("start");
    let worker = pinned
        .worker()
        .register(Alpha)
        .register(Beta)
        .build()
        .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 3);
}

/// The part of `body` from `from` to the next `to`.
fn part<'a>(body: &'a str, from: &str, to: &str) -> &'a str {
    body.split(from)
        .nth(1)
        .and_then(|rest| rest.split(to).next())
        .unwrap_or_else(|| panic!("no {from}: {body}"))
}

#[tokio::test]
async fn the_page_picks_a_window_that_fits_and_says_why() {
    let t = TestSchema::new().await;
    seed(&t).await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    // Three days back: the smallest window holding it is 7d.
    let (status, _, body) = http(base, "GET", "/insights", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h1>Insights, last 7d</h1>"), "{body}");
    let why = part(&body, r#"<p class="picked">"#, "</p>");
    assert!(
        why.starts_with("Window 7d, picked: the smallest of 1h, 24h, 7d and 30d that holds the newest run's start, <time"),
        "{why}"
    );
    assert!(
        why.contains(r#"<span class="ago">3 days ago</span>"#),
        "{why}"
    );
    assert!(
        body.contains(r#"<a class="current" href="/insights?window=7d">7d</a>"#),
        "{body}"
    );
    // Picked, not asked: the form does not pin it.
    assert!(!body.contains(r#"name="window""#), "{body}");

    // Asked for: shown as asked, though nothing ended in it.
    let (status, _, body) = http(base, "GET", "/insights?window=1h", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Window 1h, as asked."), "{body}");
    assert!(body.contains("No step ended in this window."), "{body}");
    assert!(
        body.contains(r#"<input type="hidden" name="window" value="1h">"#),
        "{body}"
    );

    // An empty window parameter is none.
    let (status, _, body) = http(base, "GET", "/insights?window=&workflow=", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Window 7d, picked"), "{body}");
}

#[tokio::test]
async fn a_schema_without_runs_shows_a_day_and_says_so() {
    let t = TestSchema::new().await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let (status, _, body) = http(dashboard.url.as_str(), "GET", "/insights", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("Window 24h, picked: no run has started yet."),
        "{body}"
    );
}

#[tokio::test]
async fn failures_are_marked_and_a_prefix_keeps_its_workflows() {
    let t = TestSchema::new().await;
    seed(&t).await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", "/insights?window=7d", &[], "");
    assert_eq!(status, 200, "{body}");
    // The known names are offered.
    let names = part(&body, r#"<datalist id="workflows">"#, "</datalist>");
    assert_eq!(
        names,
        r#"<option value="insights.alpha"></option><option value="insights.beta"></option>"#
    );
    // Two completed attempts, one paused on its error: a failure column,
    // marked, and the bucket's failures totalled.
    let head = part(&body, r#"<table class="outcomes"><thead><tr>"#, "</tr>");
    assert_eq!(
        head,
        r#"<th>Bucket</th><th>completed</th><th class="failure">paused on an error</th><th class="failure">Failures</th>"#
    );
    let row = part(
        part(&body, r#"<table class="outcomes">"#, "</table>"),
        "<tbody>",
        "</tbody>",
    );
    assert!(
        row.ends_with(r#"<td class="num">2</td><td class="num failure">1</td><td class="num failure">1</td></tr>"#),
        "{row}"
    );
    assert!(
        body.contains("Failures (marked) are attempts that ended with an error"),
        "{body}"
    );
    // Runs: three top-level started, no children; one pause.
    let runs = part(&body, r#"<table class="counts">"#, "</table>");
    let started: i64 = runs
        .split("<tr>")
        .filter(|r| r.starts_with("<td>"))
        .filter_map(|r| r.split(r#"<td class="num">"#).nth(1))
        .filter_map(|c| c.split('<').next())
        .filter_map(|n| n.parse::<i64>().ok())
        .sum();
    assert_eq!(started, 3, "{runs}");

    // A prefix: beta alone, no failure, the filter kept in the window links.
    let (status, _, body) = http(
        base,
        "GET",
        "/insights?window=7d&workflow=insights.b",
        &[],
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("<h1>Insights, last 7d, workflows starting with insights.b</h1>"),
        "{body}"
    );
    assert!(
        body.contains(r#"<input name="workflow" list="workflows" placeholder="name or its start" value="insights.b">"#),
        "{body}"
    );
    assert!(
        body.contains(r#"<a class="" href="/insights?window=30d&amp;workflow=insights.b">30d</a>"#),
        "{body}"
    );
    let head = part(&body, r#"<table class="outcomes"><thead><tr>"#, "</tr>");
    assert_eq!(
        head,
        r#"<th>Bucket</th><th>completed</th><th class="failure">Failures</th>"#
    );
    let slowest = part(&body, r#"<table class="slowest">"#, "</table>");
    assert!(slowest.contains("<td>insights.beta</td>"), "{slowest}");
    assert!(!slowest.contains("insights.alpha"), "{slowest}");
    assert!(
        body.contains(r#"<a href="/insights?window=7d">every workflow</a>"#),
        "{body}"
    );

    // A prefix nothing has.
    let (status, _, body) = http(base, "GET", "/insights?window=7d&workflow=nothing", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("No step ended in this window."), "{body}");
}
