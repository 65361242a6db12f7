//! The dashboard's guards: it will not serve off loopback without a token;
//! with one, nothing is served without it; forms need the browser's CSRF
//! token and a same-origin `Origin`; behind a proxy, the public origin is the
//! site.

use pgbus_runtime::RunStatus;

use super::{cookie, dashboard_refuses, form_token, http, plain_run};
use crate::common::{Dashboard, TestSchema};

#[test]
fn off_loopback_it_will_not_serve_without_a_token() {
    let (code, err) = dashboard_refuses(&["--bind", "0.0.0.0:0", "--no-token"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("refusing to serve on 0.0.0.0:0 without an access token"),
        "{err}"
    );
}

/// Given no token, the dashboard makes one and prints its link: nothing is
/// served without it, the link lets a browser in once with a session
/// cookie, and another start makes another token.
#[tokio::test]
async fn without_a_token_one_is_made_and_its_link_printed() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "x").await;
    let dashboard = Dashboard::start_as_given(&t.name, &[]);
    let link = dashboard.link.clone().expect("a printed link");
    let token = link.split("?token=").nth(1).expect("a token").to_owned();
    assert_eq!(token.len(), 32, "{link}");
    let base = dashboard.url.as_str();
    assert_eq!(http(base, "GET", "/", &[], "").0, 401);
    assert_eq!(
        http(base, "GET", "/", &[("Host", "localhost")], "").0,
        401,
        "a loopback name is not a way in when there is a token"
    );
    let (status, head, _) = http(base, "GET", &format!("/?token={token}"), &[], "");
    assert_eq!(status, 303, "{head}");
    let session = cookie(&head, "pgbus_session").expect("a session cookie");
    assert!(!session.contains(&token), "the cookie is not the token");
    let (status, _, body) = http(
        base,
        "GET",
        &format!("/runs/{}", run.0),
        &[("Cookie", &format!("pgbus_session={session}"))],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let again = Dashboard::start_as_given(&t.name, &[]);
    assert_ne!(again.link, dashboard.link, "each start makes its own token");
    // An empty token (`PGBUS_DASHBOARD_TOKEN=`) is none given, not a token
    // that an empty `?token=` matches.
    let empty = Dashboard::start_as_given(&t.name, &["--token", ""]);
    assert!(empty.link.is_some(), "a token is made");
    let (status, _, _) = http(&empty.url, "GET", "/?token=", &[], "");
    assert_eq!(status, 401);
}

#[tokio::test]
async fn with_a_token_nothing_is_served_without_it() {
    let t = TestSchema::new().await;
    let dashboard = Dashboard::start(&t.name, &["--token", "s3cret-token-of-16"]);
    let base = dashboard.url.as_str();
    assert_eq!(http(base, "GET", "/", &[], "").0, 401);
    assert_eq!(http(base, "GET", "/style.css", &[], "").0, 401);
    assert_eq!(http(base, "GET", "/refresh.js", &[], "").0, 401);
    assert_eq!(
        http(base, "GET", "/", &[("Authorization", "Bearer wrong")], "").0,
        401
    );
    assert_eq!(http(base, "GET", "/?token=wrong", &[], "").0, 401);
    assert_eq!(
        http(
            base,
            "GET",
            "/",
            &[("Authorization", "Bearer s3cret-token-of-16")],
            ""
        )
        .0,
        200
    );
    // A link with the token sets it as a cookie and drops it from the address.
    let (status, head, _) = http(base, "GET", "/insights?token=s3cret-token-of-16", &[], "");
    assert_eq!(status, 303, "{head}");
    assert!(
        head.to_lowercase().contains("location: /insights"),
        "{head}"
    );
    // The cookie stands for the token and is not the token: a page on
    // another localhost port receives the cookie, and learns no token.
    assert!(cookie(&head, "pgbus_token").is_none(), "{head}");
    let session = cookie(&head, "pgbus_session").expect("a session cookie");
    assert!(!session.contains("s3cret"), "{session}");
    assert!(!head.contains("s3cret-token-of-16;"), "{head}");
    assert!(
        head.contains("HttpOnly") && head.contains("SameSite=Lax"),
        "{head}"
    );
    let with_cookie = format!("pgbus_session={session}");
    assert_eq!(
        http(base, "GET", "/", &[("Cookie", &with_cookie)], "").0,
        200
    );
    // A session this process did not sign, or one past its time: no entry.
    let (until, mac) = session.split_once('.').expect("until.mac");
    for forged in [
        format!("pgbus_session={until}.{}", "0".repeat(mac.len())),
        format!("pgbus_session=1.{mac}"),
        "pgbus_session=s3cret-token-of-16".to_owned(),
        "pgbus_token=s3cret-token-of-16".to_owned(),
    ] {
        assert_eq!(
            http(base, "GET", "/", &[("Cookie", &forged)], "").0,
            401,
            "{forged}"
        );
    }
    // The link keeps its other parameters, and never leaves the site.
    let (status, head, _) = http(
        base,
        "GET",
        "/?status=paused&token=s3cret-token-of-16",
        &[],
        "",
    );
    assert_eq!(status, 303);
    assert!(
        head.to_lowercase().contains("location: /?status=paused\r"),
        "{head}"
    );
    for path in ["//evil.example/x", "/\\evil.example"] {
        let (_, head, _) = http(
            base,
            "GET",
            &format!("{path}?token=s3cret-token-of-16"),
            &[],
            "",
        );
        assert!(
            head.to_lowercase().contains("location: /\r"),
            "{path}: {head}"
        );
    }
    // Even with the cookie already set, a link drops the token from the
    // address; and the scheme's case does not matter.
    let (status, head, _) = http(
        base,
        "GET",
        "/?token=s3cret-token-of-16",
        &[("Cookie", &with_cookie)],
        "",
    );
    assert_eq!(status, 303, "{head}");
    let bearer = [("Authorization", "bearer s3cret-token-of-16")];
    assert_eq!(http(base, "GET", "/", &bearer, "").0, 200);
    // With a token, any Host may reach it (the token is the guard).
    let (status, _, _) = http(
        base,
        "GET",
        "/",
        &[
            ("Authorization", "Bearer s3cret-token-of-16"),
            ("Host", "dash.example"),
        ],
        "",
    );
    assert_eq!(status, 200);
}

#[tokio::test]
async fn without_a_token_it_answers_only_to_loopback_names_with_safe_headers() {
    let t = TestSchema::new().await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let port = base.rsplit(':').next().expect("a port");
    // A page of another site whose name now resolves to 127.0.0.1.
    let evil = format!("evil.example:{port}");
    assert_eq!(http(base, "GET", "/", &[("Host", &evil)], "").0, 421);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        assert_eq!(
            http(base, "GET", "/", &[("Host", &host)], "").0,
            200,
            "{host}"
        );
    }
    let (_, head, _) = http(base, "GET", "/", &[], "");
    let head = head.to_lowercase();
    for header in [
        "content-security-policy: default-src 'none'",
        "x-frame-options: deny",
        "x-content-type-options: nosniff",
        "referrer-policy: same-origin",
    ] {
        assert!(head.contains(header), "{header} in {head}");
    }
    assert_eq!(http(base, "GET", "/no/such/page", &[], "").0, 404);
}

#[tokio::test]
async fn forms_need_the_browsers_csrf_token_and_the_same_origin() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "<script>alert(1)</script>").await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let page = format!("/runs/{}", run.0);
    let (status, head, body) = http(base, "GET", &page, &[], "");
    assert_eq!(status, 200);
    // What a run holds is shown, escaped.
    assert!(!body.contains("<script>alert(1)</script>"), "{body}");
    assert!(body.contains("&lt;script&gt;"), "{body}");
    // The cookie holds the browser's id; the form's token is derived from
    // it under the dashboard's secret.
    let id = cookie(&head, "pgbus_csrf").expect("a CSRF cookie");
    let csrf = form_token(&body);
    assert_ne!(csrf, id);
    let cookies = format!("pgbus_csrf={id}");
    let action = format!("/runs/{}/pause", run.0);
    let origin = base.to_owned();

    // Refused, nothing changes: a wrong token; the right one with no cookie
    // to match; a cookie a page on another localhost port planted (cookies
    // ignore ports) with itself as the token, which is not the token of that
    // id; the right token and cookie with no `Origin` (not a browser's form
    // post).
    let planted = "0123456789abcdef0123456789abcdef";
    let planted_cookie = format!("pgbus_csrf={planted}");
    for (headers, form) in [
        (
            vec![("Cookie", cookies.as_str()), ("Origin", origin.as_str())],
            "forged".to_owned(),
        ),
        (vec![("Origin", origin.as_str())], csrf.clone()),
        (
            vec![
                ("Cookie", planted_cookie.as_str()),
                ("Origin", origin.as_str()),
            ],
            planted.to_owned(),
        ),
        (vec![("Cookie", cookies.as_str())], csrf.clone()),
    ] {
        let (status, _, _) = http(
            base,
            "POST",
            &action,
            &headers,
            &format!("csrf={form}&actor=eve&reason=x"),
        );
        assert_eq!(status, 403, "{headers:?} {form}");
    }
    // The right token from another site's page: refused.
    let (status, _, _) = http(
        base,
        "POST",
        &action,
        &[("Cookie", &cookies), ("Origin", "http://evil.example")],
        &format!("csrf={csrf}&actor=eve&reason=x"),
    );
    assert_eq!(status, 403);
    assert_eq!(t.status(run).await, RunStatus::Ready);

    // From the dashboard's own page: done, with its actor.
    let (status, head, _) = http(
        base,
        "POST",
        &action,
        &[("Cookie", &cookies), ("Origin", &origin)],
        &format!("csrf={csrf}&actor=bob&reason=looking+into+it"),
    );
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("done=pause"), "{head}");
    assert_eq!(t.status(run).await, RunStatus::Paused);
    let view = t.db.client().run(run).await.expect("run");
    let paused = view
        .events
        .iter()
        .find(|e| e.event == "paused")
        .expect("a paused event");
    assert_eq!(paused.actor, "dashboard:bob");
    assert_eq!(paused.reason.as_deref(), Some("looking into it"));

    // No name: refused as a notice, nothing changes.
    let (status, head, _) = http(
        base,
        "POST",
        &action.replace("pause", "resume"),
        &[("Cookie", &cookies), ("Origin", &origin)],
        &format!("csrf={csrf}&actor=+&reason=back"),
    );
    assert_eq!(status, 303);
    assert!(head.contains("error=actor"), "{head}");
    assert_eq!(t.status(run).await, RunStatus::Paused);

    // A refused move comes back as the notice, not an error page.
    let (status, head, _) = http(
        base,
        "POST",
        &action,
        &[("Cookie", &cookies), ("Origin", &origin)],
        &format!("csrf={csrf}&actor=bob&reason=again"),
    );
    assert_eq!(status, 303);
    assert!(head.contains("error=already-paused"), "{head}");
    assert_eq!(http(base, "GET", "/runs/987654321", &[], "").0, 404);
    assert_eq!(http(base, "GET", "/insights?window=2h", &[], "").0, 400);
    assert_eq!(http(base, "GET", "/runs?status=stuck", &[], "").0, 400);
}

/// A token is at least 16 characters; it can come from a file (or the
/// environment) instead of a flag that `ps` shows.
#[tokio::test]
async fn tokens_are_long_and_may_come_from_a_file() {
    let (code, err) = dashboard_refuses(&["--token", "a"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("at least 16 characters"), "{err}");

    let t = TestSchema::new().await;
    let dir = std::env::temp_dir().join(format!("pgbus-token-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let file = dir.join("token");
    std::fs::write(&file, "from-a-file-0123456789\n").expect("the token file");
    let dashboard = Dashboard::start(&t.name, &["--token-file", file.to_str().expect("a path")]);
    let base = dashboard.url.as_str();
    assert_eq!(http(base, "GET", "/", &[], "").0, 401);
    assert_eq!(
        http(
            base,
            "GET",
            "/",
            &[("Authorization", "Bearer from-a-file-0123456789")],
            ""
        )
        .0,
        200
    );
    drop(dashboard);

    // A token file with no token is an error, not a dashboard without one.
    let blank = dir.join("blank");
    std::fs::write(&blank, "\nreal-token-0123456789\n").expect("a blank first line");
    let blank = blank.to_str().expect("a path");
    let (code, err) = dashboard_refuses(&["--bind", "127.0.0.1:0", "--token-file", blank]);
    assert_eq!(code, Some(1));
    assert!(err.contains("holds no token"), "{err}");
    // Behind a proxy, a token is required: every request comes from loopback.
    let (code, err) = dashboard_refuses(&[
        "--bind",
        "127.0.0.1:0",
        "--no-token",
        "--public-origin",
        "https://ops.example.com",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot be used with"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Behind a reverse proxy that serves `https://ops.example.com` and sends
/// its own `Host`: forms from the public origin act, others do not; the
/// cookies are `Secure` and `__Host-` prefixed.
#[tokio::test]
async fn behind_a_proxy_the_public_origin_is_this_site() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "p").await;
    let token = "proxy-token-0123456789";
    let dashboard = Dashboard::start(
        &t.name,
        &[
            "--token",
            token,
            "--public-origin",
            "https://ops.example.com",
        ],
    );
    let base = dashboard.url.as_str();
    let proxied = [("Host", "internal:8080")];
    let (status, head, _) = http(base, "GET", &format!("/?token={token}"), &proxied, "");
    assert_eq!(status, 303, "{head}");
    let session = cookie(&head, "__Host-pgbus_session").expect("a __Host- session cookie");
    assert!(head.contains("Secure"), "{head}");
    let page = format!("/runs/{}", run.0);
    let with_session = format!("__Host-pgbus_session={session}");
    let (status, head, body) = http(
        base,
        "GET",
        &page,
        &[("Cookie", &with_session), proxied[0]],
        "",
    );
    assert_eq!(status, 200);
    let id = cookie(&head, "__Host-pgbus_csrf").expect("a __Host- CSRF cookie");
    let csrf = form_token(&body);
    let cookies = format!("{with_session}; __Host-pgbus_csrf={id}");
    let form = format!("csrf={csrf}&actor=ops&reason=proxy");
    let action = format!("/runs/{}/pause", run.0);
    for origin in [
        "https://evil.example",
        "http://ops.example.com",
        "http://internal:8080x",
    ] {
        let headers = [("Cookie", cookies.as_str()), ("Origin", origin), proxied[0]];
        assert_eq!(
            http(base, "POST", &action, &headers, &form).0,
            403,
            "{origin}"
        );
    }
    let headers = [
        ("Cookie", cookies.as_str()),
        ("Origin", "https://ops.example.com"),
        proxied[0],
    ];
    let (status, head, _) = http(base, "POST", &action, &headers, &form);
    assert_eq!(status, 303, "{head}");
    assert_eq!(t.status(run).await, RunStatus::Paused);
}
