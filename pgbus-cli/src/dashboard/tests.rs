//! The guard in front of every form: each POST route of the router, walked
//! from [`form_routes`], refuses a form without this browser's CSRF token
//! and one from another origin, and takes the one from its own page.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{App, Settings, Token, form_routes, pages, routes};

type Headers<'a> = Vec<(&'a str, &'a str)>;

/// One POST to the dashboard at `addr`: the answer's status.
async fn post(addr: std::net::SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        let _ = write!(request, "{name}: {value}\r\n");
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer}"))
}

/// The concrete paths that reach `route`, and the fields of a form that
/// would be taken there; a route without an entry here fails the test, so
/// a new form cannot go unwalked.
fn sample(route: &str) -> (Vec<String>, &'static str) {
    match route {
        "/runs/{id}/{action}" => (
            pages::ACTIONS
                .iter()
                .map(|action| format!("/runs/987654321/{action}"))
                .collect(),
            "actor=ops&reason=walking+the+routes",
        ),
        "/bulk" => (
            vec!["/bulk".to_owned()],
            "action=cancel&workflow=none.such&status=ready&from=1&upto=1&expected=0\
             &digest=00&actor=ops&reason=walking+the+routes",
        ),
        other => panic!("no sample form for the POST route {other}: add one"),
    }
}

#[tokio::test]
async fn every_form_route_refuses_a_missing_or_wrong_token_and_a_foreign_origin() {
    let database = pgbus_testkit::TestDatabase::new()
        .await
        .expect("a test schema");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("its address");
    let app = Arc::new(App::new(
        database.db().clone(),
        Settings {
            bind: addr,
            token: Token::None,
            retention: None,
            public_origin: None,
            lost_worker_threshold: Duration::from_secs(30),
            replica: None,
        },
    ));
    let server = tokio::spawn(axum::serve(listener, routes(&app)).into_future());
    // A browser's id cookie, and the token the dashboard derives from it.
    let id = "0123456789abcdef0123456789abcdef";
    let cookie = format!("pgbus_csrf={id}");
    let token = app.csrf_for(id);
    let other = app.csrf_for("fedcba9876543210fedcba9876543210");
    let origin = format!("http://{addr}");
    let routes = form_routes();
    assert!(!routes.is_empty());
    for (route, _) in routes {
        let (paths, fields) = sample(route);
        for path in paths {
            let with = |token: &str| format!("csrf={token}&{fields}");
            let refused: [(&str, Headers, String); 6] = [
                (
                    "no token",
                    vec![("Cookie", &cookie), ("Origin", &origin)],
                    fields.to_owned(),
                ),
                (
                    "a wrong token",
                    vec![("Cookie", &cookie), ("Origin", &origin)],
                    with("forged"),
                ),
                (
                    "another browser's token",
                    vec![("Cookie", &cookie), ("Origin", &origin)],
                    with(&other),
                ),
                (
                    "the token without its cookie",
                    vec![("Origin", &origin)],
                    with(&token),
                ),
                (
                    "a foreign Origin",
                    vec![("Cookie", &cookie), ("Origin", "http://evil.example")],
                    with(&token),
                ),
                ("no Origin", vec![("Cookie", &cookie)], with(&token)),
            ];
            for (why, headers, body) in refused {
                assert_eq!(
                    post(addr, &path, &headers, &body).await,
                    403,
                    "{path}: {why}"
                );
            }
            // The same form from its own page is taken: the route exists and
            // the refusals above were the guard's.
            let status = post(
                addr,
                &path,
                &[("Cookie", &cookie), ("Origin", &origin)],
                &with(&token),
            )
            .await;
            assert!(
                ![403, 404, 405, 422].contains(&status),
                "{path}: taken, not {status}"
            );
        }
    }
    server.abort();
}
