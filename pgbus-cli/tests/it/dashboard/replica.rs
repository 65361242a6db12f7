//! Reads off the primary (issue 23): with `--replica-url`, pages read the
//! replica and say how far behind it is; every action goes to the primary,
//! and this browser's pages right after one read the primary. The replica
//! here is the primary with every transaction read-only, so a write sent
//! to it would fail.

use pgbus_runtime::RunStatus;

use super::bulk::{ended, field, location};
use super::{cookie, form_token, http, plain_run};
use crate::common::{Dashboard, TestSchema, database_url};

/// The test database's URL, every transaction of its sessions read-only.
fn read_only_url() -> String {
    let url = database_url();
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}options=-c%20default_transaction_read_only%3Don")
}

const FROM_REPLICA: &str = "read from the replica URL, which is not a replica (nothing lags)";
const AFTER_ACTION: &str = "read from the primary, after your action</span>";

#[tokio::test]
async fn pages_read_the_replica_and_actions_the_primary() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "x").await;
    let primary_only = Dashboard::start(&t.name, &[]);
    let (_, _, body) = http(&primary_only.url, "GET", "/", &[], "");
    assert!(
        body.contains(r#"<span class="source">read from the primary</span>"#),
        "{body}"
    );

    let replica = read_only_url();
    let dashboard = Dashboard::start(&t.name, &["--replica-url", &replica]);
    let base = dashboard.url.as_str();
    for path in [
        "/".to_owned(),
        "/runs".to_owned(),
        format!("/runs/{}", run.0),
        "/queues".to_owned(),
        "/limits".to_owned(),
        "/insights".to_owned(),
        "/workers".to_owned(),
        "/schedules".to_owned(),
        "/bulk?action=cancel&workflow=dashboard.plain&status=ready".to_owned(),
    ] {
        let (status, _, body) = http(base, "GET", &path, &[], "");
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains(FROM_REPLICA), "{path}: {body}");
    }

    // A pause from the run's page: done on the primary; the page it leads
    // to reads the primary and shows it, while a browser without the
    // action's cookie reads the replica.
    let page = format!("/runs/{}", run.0);
    let (_, head, body) = http(base, "GET", &page, &[], "");
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let csrf = form_token(&body);
    let cookies = format!("pgbus_csrf={id}");
    let (status, head, body) = http(
        base,
        "POST",
        &format!("{page}/pause"),
        &[("Cookie", &cookies), ("Origin", base)],
        &format!("csrf={csrf}&actor=bob&reason=on+the+primary"),
    );
    assert_eq!(status, 303, "{head}{body}");
    assert!(head.contains("done=pause"), "{head}");
    assert_eq!(t.status(run).await, RunStatus::Paused);
    let wrote = cookie(&head, "pgbus_wrote").expect("a read-the-primary cookie");
    let after = location(&head);
    let (status, _, body) = http(
        base,
        "GET",
        &after,
        &[("Cookie", &format!("{cookies}; pgbus_wrote={wrote}"))],
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(AFTER_ACTION), "{body}");
    assert!(body.contains("badge paused"), "{body}");
    let (_, _, body) = http(base, "GET", &after, &[("Cookie", &cookies)], "");
    assert!(body.contains(FROM_REPLICA), "{body}");
    // A forged one reads the replica.
    let (_, _, body) = http(
        base,
        "GET",
        &after,
        &[("Cookie", "pgbus_wrote=99999999999.00")],
        "",
    );
    assert!(body.contains(FROM_REPLICA), "{body}");

    // A bulk resume, confirmed on a page read from the replica, acts on
    // the primary.
    let (_, head, page) = http(
        base,
        "GET",
        "/bulk?action=resume&workflow=dashboard.plain&status=paused",
        &[],
        "",
    );
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let cookies = format!("pgbus_csrf={id}");
    let form = format!(
        "csrf={}&action=resume&workflow=dashboard.plain&status=paused&from={}&upto={}\
         &expected={}&digest={}&actor=ops&reason=go+on",
        form_token(&page),
        field(&page, "from"),
        field(&page, "upto"),
        field(&page, "expected"),
        field(&page, "digest"),
    );
    let (status, head, _) = http(
        base,
        "POST",
        "/bulk",
        &[("Cookie", &cookies), ("Origin", base)],
        &form,
    );
    assert_eq!(status, 303, "{head}");
    let done = ended(base, &location(&head));
    assert!(done.contains("Done: 1 of 1 run resumed."), "{done}");
    assert_eq!(t.status(run).await, RunStatus::Ready);
}
