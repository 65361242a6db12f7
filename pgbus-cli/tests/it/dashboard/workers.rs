//! The workers page, and what the pages say of a run no live worker can run
//! (issue 19): a banner on its page, a mark in the runs list, gone once a
//! worker that has what was missing registers.

use pgbus_runtime::prelude::*;

use super::{Plain, http, plain_run};
use crate::common::{Dashboard, TestSchema};

/// Another workflow, for a worker that lacks `dashboard.plain`.
struct Other;

#[workflow(name = "dashboard.other")]
impl Other {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test]
async fn the_workers_page_lists_live_workers_with_what_they_run() {
    let t = TestSchema::new().await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let (status, _, body) = http(base, "GET", "/workers", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h1>Workers</h1>"), "{body}");
    assert!(body.contains("No live workers"), "{body}");
    assert!(body.contains("href=\"/workers\""), "in the navigation");

    let worker =
        t.db.worker()
            .name("dash-worker-<1>")
            .concurrency(4)
            .register(Plain)
            .register(Other)
            .build()
            .expect("worker");
    worker.heartbeat().await.expect("a heartbeat registers it");
    let (status, _, body) = http(base, "GET", "/workers", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("dash-worker-&lt;1&gt;"), "escaped: {body}");
    let short = &Plain::DEFINITION.digest[..12];
    assert!(
        body.contains(&format!(
            "dashboard.plain <code title=\"{}\">{short}</code>",
            Plain::DEFINITION.digest
        )),
        "{body}"
    );
    assert!(body.contains("dashboard.other"), "{body}");
    assert!(body.contains("<td>4</td>"), "the concurrency: {body}");
    assert!(body.contains(" ago</td>"), "the heartbeat's age: {body}");

    // Silent for longer than the threshold: gone, unless the dashboard's
    // threshold is longer.
    t.batch("UPDATE {schema}.workers SET heartbeat_at = now() - interval '1 minute'")
        .await;
    let (_, _, body) = http(base, "GET", "/workers", &[], "");
    assert!(body.contains("No live workers"), "{body}");
    let patient = Dashboard::start(&t.name, &["--lost-worker-threshold", "5m"]);
    let (_, _, body) = http(&patient.url, "GET", "/workers", &[], "");
    assert!(body.contains("dash-worker-&lt;1&gt;"), "{body}");
}

#[tokio::test]
async fn a_run_no_live_worker_can_run_has_a_banner_and_a_mark() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "stuck").await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let page = format!("/runs/{}", run.0);

    let (status, _, body) = http(base, "GET", &page, &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("class=\"banner stuck\""), "{body}");
    assert!(
        body.contains("no live worker registered workflow `dashboard.plain`"),
        "{body}"
    );
    assert!(body.contains("has been due since"), "{body}");
    let (_, _, list) = http(base, "GET", "/runs", &[], "");
    assert!(list.contains("cannot run: workflow missing"), "{list}");

    // A worker of another workflow changes nothing; one of this one does.
    let other = t.db.worker().register(Other).build().expect("worker");
    other.heartbeat().await.expect("a heartbeat registers it");
    let (_, _, body) = http(base, "GET", &page, &[], "");
    assert!(body.contains("class=\"banner stuck\""), "{body}");
    let plain = t.db.worker().register(Plain).build().expect("worker");
    plain.heartbeat().await.expect("a heartbeat registers it");
    let (_, _, body) = http(base, "GET", &page, &[], "");
    assert!(!body.contains("banner stuck"), "{body}");
    let (_, _, list) = http(base, "GET", "/runs", &[], "");
    assert!(!list.contains("cannot run"), "{list}");
}
