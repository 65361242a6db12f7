//! A run's page shows outputs, errors and their causes whole on demand
//! (issue 23), within the value-size bound of the read.

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
