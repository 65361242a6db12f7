//! Bulk actions from a filtered runs list (issue 23): the confirmation
//! counts the runs, the confirming form needs its CSRF token, and the job
//! acts on exactly the confirmed set: not on a run started afterwards, nor
//! on runs another filter matches, nor on another set of as many runs; a
//! form submitted twice starts one job.

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use super::{cookie, form_token, http, plain_run};
use crate::common::{Dashboard, TestSchema};

struct Other;

#[workflow(name = "dashboard.other", input = String)]
impl Other {
    #[step]
    async fn only(&self, _cx: &mut StepCx<String>) {}
}

/// The value of the hidden field `name` of a page's form.
pub(super) fn field(body: &str, name: &str) -> String {
    body.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a field {name}: {body}"))
        .to_owned()
}

/// The bulk action's page `path` once its job has ended (within 10 s,
/// asked every 50 ms): a condition, not a sleep.
pub(super) fn ended(base: &str, path: &str) -> String {
    for _ in 0..200 {
        let (status, _, body) = http(base, "GET", path, &[], "");
        assert_eq!(status, 200, "{body}");
        if body.contains("Done: ") {
            return body;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the bulk action did not end");
}

/// Where a redirect sends the browser.
pub(super) fn location(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .expect("a location")
        .trim()
        .to_owned()
}

#[tokio::test]
async fn a_bulk_cancel_acts_on_exactly_the_confirmed_runs() {
    let t = TestSchema::new().await;
    let mut confirmed = Vec::new();
    for n in 0..3 {
        confirmed.push(plain_run(&t, &format!("bulk {n}")).await);
    }
    let ended_already = plain_run(&t, "ended").await;
    t.db.client()
        .cancel(ended_already, "test", "not ready")
        .await
        .expect("cancelled");
    let other =
        t.db.client()
            .start::<Other>(&"other".to_owned())
            .await
            .expect("start")
            .run_id;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    // The confirmation counts the runs and names them.
    let (status, head, page) = http(
        base,
        "GET",
        "/bulk?action=cancel&workflow=dashboard.plain&status=ready",
        &[],
        "",
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<strong>3 runs</strong> match"), "{page}");
    assert!(!page.contains("data-refresh"), "a form does not reload");
    assert_eq!(field(&page, "expected"), "3");
    assert_eq!(field(&page, "upto"), confirmed[2].0.to_string());
    assert_eq!(field(&page, "from"), confirmed[0].0.to_string());
    let digest = field(&page, "digest");
    assert_eq!(digest.len(), 64, "SHA-256 in hex: {digest}");
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let csrf = form_token(&page);
    let cookies = format!("pgbus_csrf={id}");
    let origin = base.to_owned();
    let headers = [("Cookie", cookies.as_str()), ("Origin", origin.as_str())];
    let form = |csrf: &str, digest: &str| {
        format!(
            "csrf={csrf}&action=cancel&workflow=dashboard.plain&status=ready&from={}&upto={}\
             &expected=3&digest={digest}&actor=ops&reason=stop+the+batch",
            confirmed[0].0, confirmed[2].0
        )
    };

    // A run started after the confirmation.
    let later = plain_run(&t, "later").await;

    // Without its token, or with a digest of other runs, or none: nothing
    // done.
    let (status, _, _) = http(base, "POST", "/bulk", &headers, &form("", &digest));
    assert_eq!(status, 403);
    let (status, _, _) = http(base, "POST", "/bulk", &headers, &form("forged", &digest));
    assert_eq!(status, 403);
    let (status, head, _) = http(base, "POST", "/bulk", &headers, &form(&csrf, "00"));
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("error=changed&was=3"), "{head}");
    let (status, _, _) = http(
        base,
        "POST",
        "/bulk",
        &headers,
        &form(&csrf, "").replace("&digest=", ""),
    );
    assert_eq!(status, 400, "a form without its digest");
    for run in confirmed.iter().chain([&later, &other]) {
        assert_eq!(t.status(*run).await, RunStatus::Ready, "nothing done yet");
    }
    // No name: back to the confirmation, nothing done.
    let (status, head, _) = http(
        base,
        "POST",
        "/bulk",
        &headers,
        &form(&csrf, &digest).replace("actor=ops", "actor=+"),
    );
    assert_eq!(status, 303);
    assert!(head.contains("error=actor"), "{head}");

    // Confirmed: a job, and its page, which follows it to its end.
    let (status, head, _) = http(base, "POST", "/bulk", &headers, &form(&csrf, &digest));
    assert_eq!(status, 303, "{head}");
    let job = location(&head);
    assert!(job.starts_with("/bulk/"), "{job}");
    let done = ended(base, &job);
    assert!(done.contains("Done: 3 of 3 runs cancelled."), "{done}");
    assert!(!done.contains("data-refresh"), "an ended job stays still");

    for run in &confirmed {
        assert_eq!(t.status(*run).await, RunStatus::Cancelled);
        let view = t.db.client().run(*run).await.expect("run");
        let cancelled = view
            .events
            .iter()
            .find(|e| e.event == "cancelled")
            .expect("a cancelled event");
        assert_eq!(cancelled.actor, "dashboard:ops");
        assert_eq!(cancelled.reason.as_deref(), Some("stop the batch"));
    }
    assert_eq!(
        t.status(later).await,
        RunStatus::Ready,
        "started after the confirmation"
    );
    assert_eq!(t.status(other).await, RunStatus::Ready, "another workflow");
    assert_eq!(http(base, "GET", "/bulk/no-such-job", &[], "").0, 404);
}

/// Only what the status filter allows is offered, and a confirmation that
/// matches nothing says so.
#[tokio::test]
async fn bulk_actions_follow_the_status_filter() {
    let t = TestSchema::new().await;
    plain_run(&t, "ready").await;
    let paused = plain_run(&t, "p").await;
    t.db.client()
        .pause(paused, "test", "for the test")
        .await
        .expect("paused");
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    // The runs list offers the actions its status filter allows, none
    // without one.
    let (_, _, list) = http(
        base,
        "GET",
        "/runs?workflow=dashboard.plain&status=ready",
        &[],
        "",
    );
    assert!(
        list.contains(
            r#"href="/bulk?action=cancel&amp;workflow=dashboard.plain&amp;status=ready""#
        ),
        "{list}"
    );
    assert!(
        !list.contains("action=resume"),
        "a ready run is not resumed"
    );
    let (_, _, list) = http(base, "GET", "/runs", &[], "");
    assert!(!list.contains("/bulk?"), "{list}");

    let (_, _, list) = http(base, "GET", "/runs?status=paused", &[], "");
    for action in ["resume", "skip", "cancel"] {
        assert!(
            list.contains(&format!("href=\"/bulk?action={action}&amp;status=paused\"")),
            "{action}: {list}"
        );
    }
    for path in [
        "/bulk?action=resume&status=ready",
        "/bulk?action=cancel&status=finished",
        "/bulk?action=cancel",
        "/bulk?action=pause&status=paused",
    ] {
        assert_eq!(http(base, "GET", path, &[], "").0, 400, "{path}");
    }
    let (status, _, page) = http(
        base,
        "GET",
        "/bulk?action=cancel&status=performing",
        &[],
        "",
    );
    assert_eq!(status, 200);
    assert!(page.contains("No runs match: nothing to cancel."), "{page}");
    assert!(!page.contains("name=\"csrf\""), "no form to confirm");
}

/// The confirming page of `path`, its CSRF cookie, and the headers a form
/// posted from it sends.
fn confirm(base: &str, path: &str) -> (String, Vec<(&'static str, String)>) {
    let (status, head, page) = http(base, "GET", path, &[], "");
    assert_eq!(status, 200, "{page}");
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let headers = vec![
        ("Cookie", format!("pgbus_csrf={id}")),
        ("Origin", base.to_owned()),
    ];
    (page, headers)
}

/// The form a confirmation page posts, with a name and a reason.
fn confirming_form(page: &str) -> String {
    let mut pairs: Vec<(String, String)> = page
        .split("<input type=\"hidden\" name=\"")
        .skip(1)
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('"')?;
            let value = rest.strip_prefix(" value=\"")?.split('"').next()?;
            Some((name.to_owned(), value.replace("&amp;", "&")))
        })
        .collect();
    pairs.push(("actor".to_owned(), "ops".to_owned()));
    pairs.push(("reason".to_owned(), "stop the batch".to_owned()));
    serde_urlencoded::to_string(&pairs).expect("a form")
}

fn post(base: &str, headers: &[(&str, String)], form: &str) -> (u16, String, String) {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    http(base, "POST", "/bulk", &headers, form)
}

/// The reviewer's repro: confirmed ready runs 22, 18, 17, 16 (19 paused);
/// then 17 is paused and 19 resumed. As many ready runs in the same range,
/// but not the same: nothing is done, and the confirmation says the runs
/// changed and shows them as they are.
#[tokio::test]
async fn a_bulk_action_refuses_another_set_of_as_many_runs() {
    let t = TestSchema::new().await;
    let mut runs = Vec::new();
    for n in 0..5 {
        runs.push(plain_run(&t, &format!("bulk {n}")).await);
    }
    let client = t.db.client();
    client
        .pause(runs[3], "test", "not in the batch")
        .await
        .expect("paused");
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (page, headers) = confirm(base, "/bulk?action=cancel&status=ready");
    assert!(page.contains("<strong>4 runs</strong> match"), "{page}");
    assert_eq!(field(&page, "from"), runs[0].0.to_string());
    assert_eq!(field(&page, "upto"), runs[4].0.to_string());
    let form = confirming_form(&page);

    client
        .pause(runs[1], "test", "meanwhile")
        .await
        .expect("paused");
    client
        .resume(runs[3], "test", "meanwhile")
        .await
        .expect("resumed");

    let (status, head, _) = post(base, &headers, &form);
    assert_eq!(status, 303, "{head}");
    let again = location(&head);
    assert!(again.contains("error=changed&was=4"), "{again}");
    for (run, was) in runs.iter().zip([
        RunStatus::Ready,
        RunStatus::Paused,
        RunStatus::Ready,
        RunStatus::Ready,
        RunStatus::Ready,
    ]) {
        assert_eq!(t.status(*run).await, was, "run {run:?}: nothing done");
    }
    let (status, _, page) = http(base, "GET", &again, &[], "");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("The runs changed since you confirmed 4 runs: nothing was done."),
        "{page}"
    );
    assert!(page.contains("<strong>4 runs</strong> match"), "{page}");
    assert!(
        page.contains(&format!("/runs/{}", runs[3].0)),
        "the run that entered the set is shown: {page}"
    );
    assert!(
        !page.contains(&format!("/runs/{}\"", runs[1].0)),
        "the run that left it is not: {page}"
    );
}

/// The same form posted twice (a double click, a reload) starts one job:
/// the second answer is the first's page, and each run is acted on once.
#[tokio::test]
async fn a_bulk_form_posted_twice_starts_one_job() {
    let t = TestSchema::new().await;
    let mut runs = Vec::new();
    for n in 0..3 {
        runs.push(plain_run(&t, &format!("bulk {n}")).await);
    }
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let (page, headers) = confirm(
        base,
        "/bulk?action=cancel&workflow=dashboard.plain&status=ready",
    );
    let form = confirming_form(&page);

    let (status, head, _) = post(base, &headers, &form);
    assert_eq!(status, 303, "{head}");
    let first = location(&head);
    assert!(first.starts_with("/bulk/"), "{first}");
    let (status, head, _) = post(base, &headers, &form);
    assert_eq!(status, 303, "{head}");
    assert_eq!(location(&head), first, "the same job");

    let done = ended(base, &first);
    assert!(done.contains("Done: 3 of 3 runs cancelled."), "{done}");
    assert!(!done.contains("Refused"), "{done}");
    // Once it has ended, the same form still answers with its page.
    let (status, head, _) = post(base, &headers, &form);
    assert_eq!(status, 303, "{head}");
    assert_eq!(location(&head), first, "the same job, ended");
    for run in &runs {
        let view = t.db.client().run(*run).await.expect("run");
        let cancelled = view
            .events
            .iter()
            .filter(|e| e.event == "cancelled")
            .count();
        assert_eq!(cancelled, 1, "run {run:?} cancelled once");
    }
}
