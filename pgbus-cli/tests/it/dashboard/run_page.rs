//! A run's page shows outputs, errors and their causes whole on demand
//! (issue 23), within the value-size bound of the read; links its parent
//! and its children; and says what it waits for.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, Database, ManualClock};

use super::runs_list::fanned;
use super::{http, plain_run};
use crate::common::{Dashboard, TestSchema};

#[tokio::test]
async fn a_run_page_shows_long_values_and_errors_whole_on_demand() {
    let t = TestSchema::new().await;
    let long_input = format!("{}<tail of the input>", "i".repeat(600));
    let run = plain_run(&t, &long_input).await;
    t.execute(
        "UPDATE {schema}.steps SET error_class = 'Flaky',
             error_message = repeat('m', 500) || '<tail of the message>',
             error_causes = '[\"the <first> cause\", \"the second cause\"]'::jsonb,
             output = jsonb_build_object('big', repeat('o', 800) || '<tail of the output>')
         WHERE run_id = $1",
        run,
    )
    .await;
    let huge = plain_run(&t, "huge").await;
    t.execute(
        "UPDATE {schema}.steps SET output = to_jsonb(repeat('h', 20000)) WHERE run_id = $1",
        huge,
    )
    .await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", &format!("/runs/{}", run.0), &[], "");
    assert_eq!(status, 200, "{body}");
    // Each long text: its start in the summary, the whole (escaped) inside.
    for tail in [
        "&lt;tail of the input&gt;",
        "&lt;tail of the message&gt;",
        "&lt;tail of the output&gt;",
    ] {
        assert!(body.contains(tail), "{tail}: {body}");
    }
    assert_eq!(
        body.matches(r#"<details class="whole">"#).count(),
        3,
        "{body}"
    );
    assert!(
        body.contains(
            r#"<ol class="causes"><li>the &lt;first&gt; cause</li><li>the second cause</li></ol>"#
        ),
        "{body}"
    );
    // An output the read left out for its size says where to read it.
    let (_, _, body) = http(base, "GET", &format!("/runs/{}", huge.0), &[], "");
    assert!(
        body.contains(&format!(
            "(20002 bytes, left out: `pgbus show {} --json --value-bytes 20002`)",
            huge.0
        )),
        "{body}"
    );
}

/// Every time shows how long ago it is, on the database's clock, beside
/// the absolute time.
#[tokio::test]
async fn times_show_how_long_ago_they_are() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "old").await;
    t.backdate(run).await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    for path in ["/runs".to_owned(), format!("/runs/{}", run.0)] {
        let (status, _, body) = http(base, "GET", &path, &[], "");
        assert_eq!(status, 200, "{path}");
        assert!(
            body.contains(r#"<span class="ago">2 h ago</span>"#),
            "{path}: created two hours back: {body}"
        );
        assert!(body.contains("<time datetime=\""), "{path}");
    }
    // A paged list links back to the newest runs, its filters kept.
    let (_, _, body) = http(base, "GET", "/runs?before=999999&status=ready", &[], "");
    assert!(
        body.contains(r#"<a class="newest" href="/runs?status=ready">← Newest runs</a>"#),
        "{body}"
    );
    let (_, _, body) = http(base, "GET", "/runs", &[], "");
    assert!(!body.contains("Newest runs"), "{body}");
}

/// Waits for a signal, two hours at most.
struct Approval;

#[workflow(name = "dashboard.approval", input = String)]
impl Approval {
    #[step(wait_for = "approved", wait_timeout = "2h")]
    async fn ship(&self, _cx: &mut StepCx<String>) {}
}

/// A child's page links its parent (which batch, of which step) and the
/// parent's links its children; the parent's page says it waits for its
/// batch.
#[tokio::test]
async fn parent_and_children_link_both_ways_and_a_batch_wait_is_said() {
    let t = TestSchema::new().await;
    let parent = fanned(&t, &["ann", "bob"]).await;
    let view = t.db.client().run(parent).await.expect("the parent");
    let batch = view.batches[0].id;
    let children =
        t.db.client()
            .list_runs(&pgbus_runtime::RunFilter::new().parent(parent))
            .await
            .expect("children");
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", &format!("/runs/{}", parent.0), &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!(
            r#"<dd class="children"><a href="/runs?parent={}">2 child runs</a></dd>"#,
            parent.0
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "<strong>Waiting: </strong>step <code>welcome_all</code> waits for its batch {batch}: \
             0 of 2 children finished (<a href=\"/runs?parent={}\">the children</a>).",
            parent.0
        )),
        "{body}"
    );
    for child in &children {
        let (_, _, body) = http(base, "GET", &format!("/runs/{}", child.id.0), &[], "");
        assert!(
            body.contains(&format!(
                r#"<dd class="parent">child of <a href="/runs/{0}">run {0}</a> (batch {batch} of step <code>welcome_all</code>)</dd>"#,
                parent.0
            )),
            "{body}"
        );
        assert!(
            !body.contains("Waiting: "),
            "a child waits for a worker: {body}"
        );
    }
}

/// A step parked for a signal on a clock pinned half an hour back: since
/// when, and when its wait times out, as the page reads them.
#[tokio::test]
async fn a_signal_wait_says_since_when_and_until_when() {
    let t = TestSchema::new().await;
    let clock = ManualClock::new(chrono::Utc::now() - chrono::TimeDelta::minutes(30));
    let pinned = Database::connect_with(
        t.database.url(),
        t.db.schema().clone(),
        Clock::Manual(clock.clone()),
    )
    .await
    .expect("connect");
    let run = pinned
        .client()
        .start::<Approval>(&"order 7".to_owned())
        .await
        .expect("start")
        .run_id;
    let worker = pinned.worker().register(Approval).build().expect("worker");
    assert_eq!(worker.run_once().await.expect("run"), 1, "the step parked");
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    let (status, _, body) = http(base, "GET", &format!("/runs/{}", run.0), &[], "");
    assert_eq!(status, 200, "{body}");
    let banner = body
        .split(r#"<p class="banner waits" role="status">"#)
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_else(|| panic!("a banner: {body}"));
    assert!(
        banner.starts_with(
            "<strong>Waiting: </strong>step <code>ship</code> waits for signal <code>approved</code>, since <time"
        ),
        "{banner}"
    );
    assert!(
        banner.contains(r#"<span class="ago">30 min ago</span>; it times out <time"#),
        "{banner}"
    );
    assert!(
        banner.ends_with(r#"<span class="ago">in 1 h</span>."#),
        "{banner}"
    );
}
