//! The overview is the landing page (issue 23): runs now per workflow and
//! status, each count a link into the filtered list (child runs included, as
//! in the count), which moved to `/runs`; links to the list from before the
//! move still reach it.

use super::runs_list::fanned;
use super::{http, plain_run};
use crate::common::{Dashboard, TestSchema};

#[tokio::test]
async fn the_overview_lands_and_old_list_links_reach_the_list() {
    let t = TestSchema::new().await;
    let _ready = plain_run(&t, "a").await;
    let paused = plain_run(&t, "b").await;
    t.db.client()
        .pause(paused, "test", "held for the test")
        .await
        .expect("paused");
    let parent = fanned(&t, &["ann"]).await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", "/", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h1>Overview</h1>"), "{body}");
    assert!(body.contains("<body data-refresh=\"5\">"), "{body}");
    for link in [
        r#"<a href="/runs?workflow=dashboard.plain&amp;exact=1&amp;status=ready&amp;children=1">1</a>"#,
        r#"<a href="/runs?workflow=dashboard.plain&amp;exact=1&amp;status=paused&amp;children=1">1</a>"#,
        r#"<a href="/">Overview</a><a href="/runs">Runs</a>"#,
    ] {
        assert!(body.contains(link), "{link}: {body}");
    }
    // A fan-out's ready child is counted, and its count's link lists it.
    let link = r#"<a href="/runs?workflow=onboarding.welcome&amp;exact=1&amp;status=ready&amp;children=1">1</a>"#;
    assert!(body.contains(link), "{body}");
    let (_, _, list) = http(
        base,
        "GET",
        "/runs?workflow=onboarding.welcome&exact=1&status=ready&children=1",
        &[],
        "",
    );
    assert!(
        list.contains(&format!(
            r#"<td class="parent"><a href="/runs/{0}">{0}</a>"#,
            parent.0
        )),
        "{list}"
    );

    // The ready run's step and the child's are due now on the default queue.
    assert!(
        body.contains(r#"<td>default</td><td class="num">2</td>"#),
        "{body}"
    );

    // The list, at its own address; a link of the old list goes there.
    let (status, _, body) = http(base, "GET", "/runs?status=paused", &[], "");
    assert_eq!(status, 200);
    assert!(body.contains("<h1>Runs</h1>"), "{body}");
    assert!(
        body.contains(&format!("href=\"/runs/{}\"", paused.0)),
        "{body}"
    );
    assert!(body.contains(r#"action="/runs""#), "{body}");
    let (status, head, _) = http(base, "GET", "/?status=paused&workflow=x", &[], "");
    assert_eq!(status, 308, "{head}");
    assert!(
        head.to_lowercase()
            .contains("location: /runs?status=paused&workflow=x\r"),
        "{head}"
    );
}
