//! The runs list (issue 23): top-level runs by default with their
//! children a link away, the workflow prefix, the search box (a run id, an
//! idempotency key, an input path), paging both ways, and bulk actions that
//! keep every filter.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunId, RunStatus, StartOptions};

use super::bulk::{ended, field, location};
use super::{cookie, form_token, http, plain_run};
use crate::common::{Dashboard, TestSchema};

/// The children's workflow; no worker runs it here, so they stay ready.
pub(super) struct Welcome;

#[workflow(name = "onboarding.welcome", input = String)]
impl Welcome {
    #[step]
    async fn greet(&self, _cx: &mut StepCx<String>) {}
}

/// Starts a [`Welcome`] child per name.
pub(super) struct Fan;

#[workflow(name = "dashboard.fan", input = Vec<String>)]
impl Fan {
    #[fan_out]
    async fn welcome_all(&self, cx: &mut StepCx<Vec<String>>, fan: &mut FanOut) -> StepResult {
        for name in cx.input().clone() {
            fan.start::<Welcome>(&name)?;
        }
        Ok(Flow::Complete)
    }
}

/// A [`Fan`] run whose step has started its children (`names`), which wait
/// for a worker; the parent waits for them.
pub(super) async fn fanned(t: &TestSchema, names: &[&str]) -> RunId {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let parent =
        t.db.client()
            .start::<Fan>(&names)
            .await
            .expect("start")
            .run_id;
    let worker = t.db.worker().register(Fan).build().expect("worker");
    worker.run_until_idle().await.expect("the fan-out ran");
    parent
}

/// The run ids a list page shows, in order.
fn listed(body: &str) -> Vec<i64> {
    body.split("<tr><td><a href=\"/runs/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next()?.parse().ok())
        .collect()
}

/// The address of the link of class `class` on a page, unescaped.
fn link(body: &str, class: &str) -> Option<String> {
    let rest = body
        .split(&format!("<a class=\"{class}\" href=\""))
        .nth(1)?;
    Some(rest.split('"').next()?.replace("&amp;", "&"))
}

#[tokio::test]
async fn top_level_runs_by_default_with_their_children_a_link_away() {
    let t = TestSchema::new().await;
    let lone = plain_run(&t, "lone").await;
    let parent = fanned(&t, &["ann", "bob"]).await;
    let children: Vec<i64> =
        t.db.client()
            .list_runs(&pgbus_runtime::RunFilter::new().parent(parent))
            .await
            .expect("children")
            .iter()
            .map(|r| r.id.0)
            .collect();
    assert_eq!(children.len(), 2);
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", "/runs", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        listed(&body),
        vec![parent.0, lone.0],
        "children hidden: {body}"
    );
    assert!(
        body.contains(&format!(
            r#"<td class="children"><a href="/runs?parent={}">2</a></td>"#,
            parent.0
        )),
        "{body}"
    );
    assert!(body.contains("data-refresh"), "the list follows itself");

    // The children link lists exactly the children, and links back.
    let (status, _, body) = http(base, "GET", &format!("/runs?parent={}", parent.0), &[], "");
    assert_eq!(status, 200);
    assert_eq!(listed(&body), children, "{body}");
    assert!(
        body.contains(&format!("<h1>Children of run {}</h1>", parent.0)),
        "{body}"
    );
    assert!(
        body.contains(&format!(r#"<a href="/runs/{0}">run {0}</a>"#, parent.0)),
        "{body}"
    );

    // Children too: every run, each child with its parent.
    let (_, _, body) = http(base, "GET", "/runs?children=1", &[], "");
    let mut all = children.clone();
    all.extend([parent.0, lone.0]);
    assert_eq!(listed(&body), all, "{body}");
    assert!(
        body.contains(&format!(
            r#"<td class="parent"><a href="/runs/{0}">{0}</a></td>"#,
            parent.0
        )),
        "{body}"
    );
    assert!(
        body.contains(r#"name="children" value="1" checked"#),
        "{body}"
    );

    // The workflow box is a prefix, and offers the known names.
    let (_, _, body) = http(base, "GET", "/runs?workflow=onboarding&children=1", &[], "");
    assert_eq!(listed(&body), children, "onboarding.welcome: {body}");
    assert!(
        body.contains(r#"<option value="onboarding.welcome">"#),
        "{body}"
    );
    assert!(body.contains(r#"<datalist id="workflows">"#), "{body}");
    let (_, _, body) = http(base, "GET", "/runs?workflow=onboarding", &[], "");
    assert_eq!(
        listed(&body),
        Vec::<i64>::new(),
        "the children are not top-level"
    );
}

#[tokio::test]
async fn the_search_box_finds_a_run_by_id_key_or_input() {
    let t = TestSchema::new().await;
    let plain = plain_run(&t, "customer c7").await;
    let keyed =
        t.db.client()
            .start_with::<Welcome>(&"c42".to_owned(), &StartOptions::new().key("order-42"))
            .await
            .expect("start")
            .run_id;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    // An id goes to its run.
    let (status, head, _) = http(base, "GET", &format!("/runs?q={}", keyed.0), &[], "");
    assert_eq!(status, 303, "{head}");
    assert_eq!(location(&head), format!("/runs/{}", keyed.0));
    // No such run: the digits are a key, and the page says so.
    let (status, _, body) = http(base, "GET", "/runs?q=987654321", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("There is no run 987654321"), "{body}");
    assert_eq!(listed(&body), Vec::<i64>::new());

    // A key finds its run, and stays in the box.
    let (_, _, body) = http(base, "GET", "/runs?q=order-42", &[], "");
    assert_eq!(listed(&body), vec![keyed.0], "{body}");
    assert!(body.contains(r#"name="q" size="28" placeholder="run id, idempotency key or $.input.path" value="order-42""#), "{body}");

    // A path finds runs by their input, and the page is drawn once.
    let path = r#"$ ? (@ == "customer c7")"#;
    let query = serde_urlencoded::to_string([("q", path)]).expect("a query");
    let (status, _, body) = http(base, "GET", &format!("/runs?{query}"), &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(listed(&body), vec![plain.0], "{body}");
    assert!(
        !body.contains("data-refresh"),
        "a scan is not redone every few seconds"
    );
    assert!(
        !body.contains("The input path was tried on"),
        "a small schema: {body}"
    );

    // A path PostgreSQL does not read: a notice, not a failure.
    let (status, _, body) = http(base, "GET", "/runs?q=%24%24%28", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#"<p class="notice error">invalid input path `$$(`: "#),
        "{body}"
    );
    assert!(body.contains("No runs match."), "{body}");
}

#[tokio::test]
async fn pages_go_older_and_newer_with_every_filter() {
    let t = TestSchema::new().await;
    let started =
        t.db.client()
            .start_many::<super::Plain>((0..60).map(|n| (format!("run {n}"), StartOptions::new())))
            .await
            .expect("started");
    let mut ids: Vec<i64> = started.iter().map(|s| s.run_id.0).collect();
    ids.sort_unstable();
    plain_run(&t, "other").await;
    t.db.client()
        .cancel(
            RunId(*ids.last().expect("ids")),
            "test",
            "one of another status",
        )
        .await
        .expect("cancelled");
    let ready: Vec<i64> = ids[..59].iter().rev().copied().collect();
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let first = "/runs?workflow=dashboard.plain&status=ready&within=1d";
    let (_, _, newest) = http(base, "GET", first, &[], "");
    // The 50 newest ready runs but "other" (started last, also ready).
    let page_one = listed(&newest);
    assert_eq!(page_one.len(), 50);
    assert_eq!(page_one[1..], ready[..49], "{newest}");
    assert!(link(&newest, "newer").is_none());
    let older = link(&newest, "next").expect("an older page");
    assert!(
        older.starts_with("/runs?workflow=dashboard.plain&status=ready&within=1d&before="),
        "{older}"
    );
    let (_, _, body) = http(base, "GET", &older, &[], "");
    assert_eq!(listed(&body), ready[49..], "{body}");
    assert!(link(&body, "next").is_none(), "the oldest page");
    let newer = link(&body, "newer").expect("a newer page");
    assert!(newer.contains("within=1d&after="), "{newer}");
    let (_, _, body) = http(base, "GET", &newer, &[], "");
    assert_eq!(listed(&body), page_one, "back where it started");
}

/// A bulk action from a list filtered by a prefix acts on the top-level
/// runs it shows, and, with children shown, on the children too: the
/// confirmation and the form carry both.
#[tokio::test]
async fn a_bulk_action_keeps_the_prefix_and_the_top_level_filter() {
    let t = TestSchema::new().await;
    let mut top = Vec::new();
    for name in ["cy", "di"] {
        top.push(
            t.db.client()
                .start::<Welcome>(&name.to_owned())
                .await
                .expect("start")
                .run_id,
        );
    }
    let parent = fanned(&t, &["ann", "bob"]).await;
    let plain = plain_run(&t, "plain").await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (_, _, list) = http(
        base,
        "GET",
        "/runs?workflow=onboarding&status=ready",
        &[],
        "",
    );
    assert!(
        list.contains(r#"href="/bulk?action=cancel&amp;workflow=onboarding&amp;status=ready""#),
        "{list}"
    );
    let (status, head, page) = http(
        base,
        "GET",
        "/bulk?action=cancel&workflow=onboarding&status=ready",
        &[],
        "",
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<strong>2 runs</strong> match"), "{page}");
    assert!(
        page.contains(
            "match: the ready runs (top-level, of workflows starting with <code>onboarding</code>)"
        ),
        "{page}"
    );
    assert_eq!(field(&page, "workflow"), "onboarding");
    assert!(!page.contains(r#"name="children""#), "top-level: {page}");
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let cookies = format!("pgbus_csrf={id}");
    let headers = [("Cookie", cookies.as_str()), ("Origin", base)];
    let form = format!(
        "csrf={}&action=cancel&workflow=onboarding&status=ready&from={}&upto={}&expected=2\
         &digest={}&actor=ops&reason=welcome+no+more",
        form_token(&page),
        field(&page, "from"),
        field(&page, "upto"),
        field(&page, "digest"),
    );
    let (status, head, _) = http(base, "POST", "/bulk", &headers, &form);
    assert_eq!(status, 303, "{head}");
    let done = ended(base, &location(&head));
    assert!(done.contains("Done: 2 of 2 runs cancelled."), "{done}");
    for run in &top {
        assert_eq!(t.status(*run).await, RunStatus::Cancelled);
    }
    let children =
        t.db.client()
            .list_runs(&pgbus_runtime::RunFilter::new().parent(parent))
            .await
            .expect("children");
    for child in &children {
        assert_eq!(child.status, RunStatus::Ready, "a child is not top-level");
    }
    assert_eq!(t.status(plain).await, RunStatus::Ready, "another prefix");

    // With children shown, the children are what is left to take.
    let (_, _, page) = http(
        base,
        "GET",
        "/bulk?action=cancel&workflow=onboarding&status=ready&children=1",
        &[],
        "",
    );
    assert!(page.contains("<strong>2 runs</strong> match"), "{page}");
    assert_eq!(field(&page, "children"), "1");
    assert_eq!(
        field(&page, "upto"),
        children[0].id.0.to_string(),
        "the newest child"
    );
}
