//! The dashboard's guards over plain HTTP: it will not serve off loopback
//! without a token; with one, nothing is served without it; forms need the
//! browser's CSRF token and a same-origin `Origin`; what runs hold is escaped.

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

mod common;
use common::{Dashboard, TestSchema, database_url};

struct Plain;

#[workflow(name = "dashboard.plain", input = String)]
impl Plain {
    #[step]
    async fn only(&self, _cx: &mut StepCx<String>) {}
}

/// One HTTP/1.1 exchange: `(status, headers, body)`.
fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let host = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).expect("connect to the dashboard");
    // The `Host` a test names, else the dashboard's own address.
    let named = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map_or(host, |(_, value)| *value);
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {named}\r\nConnection: close\r\n");
    for (name, value) in headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
    {
        let _ = write!(request, "{name}: {value}\r\n");
    }
    if !body.is_empty() {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    let _ = write!(request, "Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    (status, head.to_owned(), body.to_owned())
}

/// `pgbus dashboard args...`, which must end at once: its exit code and
/// standard error.
fn dashboard_refuses(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .arg("dashboard")
        .args(args)
        .env("DATABASE_URL", database_url())
        .env_remove("PGBUS_DASHBOARD_TOKEN")
        .output()
        .expect("run pgbus");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A run of [`Plain`] on `input`.
async fn plain_run(t: &TestSchema, input: &str) -> pgbus_runtime::RunId {
    t.db.client()
        .start::<Plain>(&input.to_owned())
        .await
        .expect("start")
        .run_id
}

/// The CSRF token of a page's forms.
fn form_token(body: &str) -> String {
    body.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form's token")
        .to_owned()
}

/// The value of the `name` cookie a response sets.
fn cookie(head: &str, name: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .find_map(|c| c.strip_prefix(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap_or_default().to_owned())
}

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
    assert_eq!(http(base, "GET", "/?status=stuck", &[], "").0, 400);
}

/// A table another session holds locked: every page that needs it answers
/// (an error page naming the lock timeout) within the lock timeout rather
/// than hanging until the 504, the stylesheet answers meanwhile, and no
/// query of the dashboard is left waiting on the lock once the pages are
/// answered: round after round, nothing piles up.
#[tokio::test]
async fn a_held_lock_leaves_no_query_of_the_dashboard_waiting() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "x").await;
    let dashboard = Dashboard::start(&t.name, &["--lock-timeout", "200ms"]);
    let base = dashboard.url.clone();

    let locker = t.lock_runs().await;

    for _round in 0..3 {
        let pages: Vec<_> = ["/", &format!("/runs/{}", run.0), "/insights?window=30d"]
            .into_iter()
            .map(|path| {
                let (base, path) = (base.clone(), path.to_owned());
                std::thread::spawn(move || http(&base, "GET", &path, &[], ""))
            })
            .collect();
        let (status, _, _) = http(&base, "GET", "/style.css", &[], "");
        assert_eq!(status, 200, "the stylesheet answers while pages wait");
        for page in pages {
            let (status, _, body) = page.join().expect("a page");
            assert_eq!(status, 500, "{body}");
            assert!(body.contains("lock timeout"), "{body}");
        }
        assert_eq!(
            t.waiting_on_runs(&locker).await,
            0,
            "no query of the dashboard waits on the lock"
        );
    }
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    let (status, _, _) = http(&base, "GET", &format!("/runs/{}", run.0), &[], "");
    assert_eq!(status, 200);
}

/// A page whose browser goes away takes its query with it: with timeouts
/// far longer than the test, the query queued behind a held lock is
/// cancelled as soon as the request's connection closes.
#[tokio::test]
async fn an_abandoned_page_cancels_its_query() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "x").await;
    let dashboard = Dashboard::start(
        &t.name,
        &["--lock-timeout", "10m", "--statement-timeout", "10m"],
    );
    let host = dashboard.url.trim_start_matches("http://").to_owned();
    let locker = t.lock_runs().await;
    let until = |want: i64| {
        let t = &t;
        let locker = &locker;
        async move {
            for _ in 0..200 {
                if t.waiting_on_runs(locker).await == want {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            false
        }
    };
    // What went wrong, asserted only once the lock is released: a failing
    // test must not leave its schema's drop queued behind the lock.
    let mut wrong = Vec::new();
    for path in [
        "/".to_owned(),
        format!("/runs/{}", run.0),
        "/insights".to_owned(),
    ] {
        let mut stream = TcpStream::connect(&host).expect("connect");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").expect("send");
        if !until(1).await {
            wrong.push(format!("{path}: its query never waited on the lock"));
        }
        drop(stream);
        if !until(0).await {
            wrong.push(format!(
                "{path}: its query still waits after the request went"
            ));
        }
    }
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(http(&dashboard.url, "GET", "/", &[], "").0, 200);
}

/// A run of 20,001 attempts and 40,001 events: its page shows the latest
/// 200 of each, says so, and links to more (at most 5,000); the page stays
/// bounded in bytes, and the dashboard answers other requests meanwhile.
#[tokio::test]
async fn a_run_of_twenty_thousand_attempts_gets_a_bounded_page() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "big").await;
    t.failed_attempts(run, "only", 20001, &["step_started", "step_failed"])
        .await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.clone();
    let path = format!("/runs/{}", run.0);

    let page = {
        let (base, path) = (base.clone(), path.clone());
        std::thread::spawn(move || http(&base, "GET", &path, &[], ""))
    };
    assert_eq!(http(&base, "GET", "/style.css", &[], "").0, 200);
    let (status, _, body) = page.join().expect("the page");
    assert_eq!(status, 200);
    assert!(
        body.contains("Showing the latest 200 of 20001 attempts"),
        "{}",
        &body[..body.len().min(2_000)]
    );
    assert!(
        body.contains("the latest 200 of 40001 events"),
        "the run's own and 40,000"
    );
    assert!(body.contains(&format!("href=\"/runs/{}?show=1000\"", run.0)));
    assert!(body.len() < 600_000, "{} bytes", body.len());
    assert!(body.contains("attempt 20001") && !body.contains("attempt 19801<"));

    let (status, _, more) = http(&base, "GET", &format!("{path}?show=1000000"), &[], "");
    assert_eq!(status, 200);
    assert!(more.contains("Showing the latest 5000 of 20001 attempts"));
    assert!(!more.contains("Show more"), "no more past the cap");
}

/// A notice on a run's page is a word the page knows, shown in its own
/// text: a link cannot make the page say what its author likes.
#[tokio::test]
async fn notices_are_words_the_page_knows() {
    let t = TestSchema::new().await;
    let run = plain_run(&t, "n").await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let base = dashboard.url.as_str();
    let (_, _, page) = http(base, "GET", &format!("/runs/{}?done=pause", run.0), &[], "");
    assert!(
        page.contains("pause: the run is ready"),
        "the run's own status"
    );
    let (_, _, page) = http(
        base,
        "GET",
        &format!("/runs/{}?error=already-paused", run.0),
        &[],
        "",
    );
    assert!(
        page.contains("The run is already paused."),
        "the code's own text"
    );
    // A link cannot make the page say what it likes: unknown words show
    // nothing, and a word never comes back as the link's text.
    let (_, _, page) = http(
        base,
        "GET",
        &format!(
            "/runs/{}?done=Your%20session%20expired&error=Call%20555-0100",
            run.0
        ),
        &[],
        "",
    );
    assert!(
        !page.contains("session expired") && !page.contains("555-0100"),
        "{page}"
    );
    assert!(!page.contains("class=\"notice"), "no notice at all");
    assert_eq!(http(base, "GET", "/runs/987654321", &[], "").0, 404);
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

/// The dashboard under the load the issue set: a million runs (five
/// workflows, a tenth of them paused, spread over 30 days) beside one run of
/// 20,001 attempts. Every page, asked all at once, answers 200 within the
/// dashboard's own page timeout (past it, a page answers 504) and stays
/// within a bound in bytes, while the stylesheet keeps answering. The times
/// are printed, not asserted.
#[tokio::test]
async fn every_page_is_bounded_beside_a_million_runs() {
    let t = TestSchema::new().await;
    let big = plain_run(&t, "big").await;
    t.failed_attempts(big, "only", 20_001, &["step_started", "step_failed"])
        .await;
    t.batch(
        "INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, input,
             created_at, updated_at, finished_at)
         SELECT 'load.w' || (n % 5), 'd', 'o',
                CASE WHEN n % 10 = 0 THEN 'paused' ELSE 'finished' END, '{}'::jsonb,
                now() - make_interval(secs => 2592000.0 * n / 1000000),
                now() - make_interval(secs => 2592000.0 * n / 1000000),
                now() - make_interval(secs => 2592000.0 * n / 1000000)
         FROM generate_series(1, 1000000) AS n;
         ANALYZE {schema}.runs, {schema}.steps, {schema}.events",
    )
    .await;
    let dashboard = Dashboard::start(&t.name, &[]);
    let pages = [
        "/".to_owned(),
        "/?status=paused".to_owned(),
        "/?workflow=load.w1&status=finished".to_owned(),
        "/?before=500000".to_owned(),
        format!("/runs/{}", big.0),
        format!("/runs/{}?show=5000", big.0),
        "/runs/500000".to_owned(),
        "/insights?window=1h".to_owned(),
        "/insights?window=24h".to_owned(),
        "/insights?window=7d".to_owned(),
        "/insights?window=30d".to_owned(),
    ];
    let began = std::time::Instant::now();
    let asked: Vec<_> = pages
        .iter()
        .map(|path| {
            let (base, path) = (dashboard.url.clone(), path.clone());
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                let (status, _, body) = http(&base, "GET", &path, &[], "");
                (path, status, body.len(), start.elapsed())
            })
        })
        .collect();
    let mut styles = Vec::new();
    while !asked.iter().all(std::thread::JoinHandle::is_finished) && styles.len() < 100_000 {
        let start = std::time::Instant::now();
        let (status, _, _) = http(&dashboard.url, "GET", "/style.css", &[], "");
        assert_eq!(status, 200, "the stylesheet answers while pages are drawn");
        styles.push(start.elapsed());
    }
    for page in asked {
        let (path, status, bytes, took) = page.join().expect("a page");
        eprintln!("{path}: {status}, {bytes} bytes in {took:?}");
        assert_eq!(status, 200, "{path} answers within the page timeout");
        let bound = if path.ends_with("show=5000") {
            16 << 20
        } else {
            4 << 20
        };
        assert!(bytes < bound, "{path}: {bytes} bytes");
    }
    let slowest = styles.iter().max().copied().unwrap_or_default();
    eprintln!(
        "all pages in {:?}; the stylesheet answered {} times meanwhile, the slowest in {slowest:?}",
        began.elapsed(),
        styles.len()
    );
}
