//! The queues and limits pages (issue 23): per queue what is due and who
//! claims from it, the limits in force; both behind every guard.

use super::{Plain, http, plain_run};
use crate::common::{Dashboard, TestSchema};

#[tokio::test]
async fn queues_name_their_workers_and_limits_their_keys() {
    let t = TestSchema::new().await;
    let _run = plain_run(&t, "x").await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();

    // Due, and no live worker claims from the queue.
    let (status, _, body) = http(base, "GET", "/queues", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h1>Queues</h1>"), "{body}");
    assert!(body.contains("<body data-refresh=\"5\">"), "{body}");
    assert!(body.contains("none: its due steps wait"), "{body}");
    let (status, _, body) = http(base, "GET", "/limits", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.matches("None in force.").count(), 2, "{body}");
    assert!(
        body.contains(r#"<a href="/queues">Queues</a><a href="/limits">Limits</a>"#),
        "in the navigation: {body}"
    );

    let worker =
        t.db.worker()
            .name("dash-queue-worker")
            .queue_concurrency("default", 2)
            .register(Plain)
            .build()
            .expect("worker");
    worker.heartbeat().await.expect("a heartbeat registers it");
    let (_, _, body) = http(base, "GET", "/queues", &[], "");
    assert!(
        body.contains(r#"<td>default</td><td class="num">1</td>"#),
        "{body}"
    );
    assert!(body.contains(">dash-queue-worker</span>"), "{body}");
    assert!(body.contains("<td class=\"listening\">1: "), "{body}");
    let (_, _, body) = http(base, "GET", "/limits", &[], "");
    assert!(
        body.contains(r#"<td><code>queue:default</code></td><td>-</td><td class="num">2</td><td>step</td><td class="empty">nothing held</td>"#),
        "{body}"
    );
}

/// The new pages are behind the token, the loopback check and the
/// security headers like every other.
#[tokio::test]
async fn the_new_pages_are_guarded() {
    let t = TestSchema::new().await;
    let with_token = Dashboard::start(&t.name, &["--token", "s3cret-token-of-16"]);
    let open = Dashboard::start(&t.name, &[]);
    for path in ["/", "/runs", "/queues", "/limits"] {
        assert_eq!(http(&with_token.url, "GET", path, &[], "").0, 401, "{path}");
        let (status, head, _) = http(
            &with_token.url,
            "GET",
            path,
            &[("Authorization", "Bearer s3cret-token-of-16")],
            "",
        );
        assert_eq!(status, 200, "{path}");
        assert!(
            head.to_lowercase()
                .contains("content-security-policy: default-src 'none'"),
            "{path}: {head}"
        );
        assert_eq!(
            http(&open.url, "GET", path, &[("Host", "evil.example")], "").0,
            421,
            "{path}"
        );
    }
}
