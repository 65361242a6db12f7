//! The schedules page (issue 20): every schedule with its next and last
//! ticks, escaped, linked to its last run.

use pgbus_runtime::schedule::Schedule;

use super::{Plain, http};
use crate::common::{Dashboard, TestSchema};

#[tokio::test]
async fn the_schedules_page_lists_next_and_last_ticks() {
    let t = TestSchema::new().await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let (status, _, body) = http(base, "GET", "/schedules", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h1>Schedules</h1>"), "{body}");
    assert!(body.contains("No schedules."), "{body}");
    assert!(body.contains("href=\"/schedules\""), "in the navigation");

    let client = t.db.client();
    client
        .create_schedule::<Plain>(
            "<every> second",
            &Schedule::cron("* * * * * *"),
            &"x".to_owned(),
        )
        .await
        .expect("created");
    client
        .create_schedule::<Plain>(
            "held",
            &Schedule::cron("@daily").timezone("Asia/Tokyo"),
            &"y".to_owned(),
        )
        .await
        .expect("created");
    client
        .pause_schedule("held", "ops", "a <b> reason")
        .await
        .expect("paused");
    // Its tick a moment ago, on the database's clock: a worker fires it now.
    t.batch(
        "UPDATE {schema}.schedules SET next_tick_at = date_trunc('second', now()) - interval '1 second'
         WHERE name = '<every> second'",
    )
    .await;
    let worker = t.db.worker().register(Plain).build().expect("a worker");
    let report = worker.fire_schedules().await.expect("a fire pass");
    // One run per tick since then: one, or a few on a slow machine.
    assert!(report.runs_started >= 1, "{report:?}");
    let fired = client
        .schedule("<every> second")
        .await
        .expect("the row")
        .last_run_id
        .expect("a run");
    let (status, _, body) = http(base, "GET", "/schedules", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("&lt;every&gt; second"), "escaped: {body}");
    assert!(body.contains("Asia/Tokyo"), "{body}");
    assert!(body.contains("paused "), "{body}");
    assert!(
        body.contains("a &lt;b&gt; reason"),
        "the reason, escaped: {body}"
    );
    assert!(
        body.contains(&format!("href=\"/runs/{fired}\"")),
        "the last run, linked: {body}"
    );
}
