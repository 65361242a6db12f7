//! Pages that change on their own reload themselves through the one script
//! the dashboard serves (`/refresh.js`, issue 23); the others load no script.

use super::{http, plain_run};
use crate::common::{Dashboard, TestSchema};

/// Whether `body` is a page that reloads itself every `secs` seconds: the
/// attribute the script reads, and the script.
fn refreshes(body: &str, secs: u32) -> bool {
    body.contains(&format!("<body data-refresh=\"{secs}\">"))
        && body.contains("<script src=\"/refresh.js\" defer></script>")
}

#[tokio::test]
async fn pages_that_change_reload_themselves_and_the_rest_load_no_script() {
    let t = TestSchema::new().await;
    let going = plain_run(&t, "going").await;
    let ended = plain_run(&t, "ended").await;
    t.db.client()
        .cancel(ended, "test", "ended for the test")
        .await
        .expect("cancelled");
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    for path in [
        "/".to_owned(),
        "/runs".to_owned(),
        "/runs?status=ready".to_owned(),
        format!("/runs/{}", going.0),
    ] {
        let (status, _, body) = http(base, "GET", &path, &[], "");
        assert_eq!(status, 200, "{path}");
        assert!(refreshes(&body, 5), "{path}: {body}");
    }
    for path in [
        format!("/runs/{}", ended.0),
        "/insights".to_owned(),
        "/workers".to_owned(),
        "/schedules".to_owned(),
        "/no/such/page".to_owned(),
    ] {
        let (_, _, body) = http(base, "GET", &path, &[], "");
        assert!(
            !body.contains("data-refresh") && !body.contains("<script"),
            "{path}: {body}"
        );
    }

    // The script is this site's, and the only kind the policy lets run: no
    // inline script, nothing from elsewhere.
    let (status, head, script) = http(base, "GET", "/refresh.js", &[], "");
    assert_eq!(status, 200);
    let head = head.to_lowercase();
    assert!(head.contains("content-type: text/javascript"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'none'; script-src 'self';"),
        "{head}"
    );
    assert!(!head.contains("unsafe-inline") && !head.contains("unsafe-eval"));
    // It reloads only a shown page, and not under someone typing or reading.
    for part in [
        "data-refresh",
        "document.visibilityState !== \"visible\"",
        "visibilitychange",
        "details[open]",
        "input, textarea, select",
    ] {
        assert!(script.contains(part), "{part}");
    }
}
