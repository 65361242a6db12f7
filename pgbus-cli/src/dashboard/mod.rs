//! `pgbus dashboard`: the runs, a run's timeline and the insights as web
//! pages, rendered on the server (no script, no CDN: the one stylesheet is
//! built into the binary), with the operator actions as forms.
//!
//! Safe by default: it binds to loopback; any other address needs an access
//! token (`--token` or `PGBUS_DASHBOARD_TOKEN`), asked of every request (an
//! `Authorization: Bearer` header, or `?token=` once, which sets an `HttpOnly`
//! cookie). Every form carries a CSRF token that must match the browser's
//! `SameSite=Strict` cookie (the double-submit pattern, as OWASP describes
//! it), and a cross-origin `Origin` is refused. Each action is an event with
//! its actor, `dashboard:` and the name the operator typed.

mod chart;
mod pages;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use pgbus_runtime::Database;
use subtle::ConstantTimeEq;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The cookie holding the access token once given.
const TOKEN_COOKIE: &str = "pgbus_token";
/// The cookie holding this browser's CSRF token.
const CSRF_COOKIE: &str = "pgbus_csrf";

/// How the dashboard serves.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Where to listen.
    pub(crate) bind: SocketAddr,
    /// The access token, if any (required off loopback).
    pub(crate) token: Option<String>,
    /// The workers' retention age, to cut the insight windows at.
    pub(crate) retention: Option<Duration>,
}

/// What every handler reads.
pub(crate) struct App {
    pub(crate) db: Database,
    pub(crate) settings: Settings,
}

/// This request's CSRF token (from its cookie, or new), for the forms.
#[derive(Debug, Clone)]
pub(crate) struct Csrf(pub(crate) String);

/// Serves until the process is stopped. Refuses to start on an address that
/// is not loopback without a token.
pub(crate) async fn serve(db: Database, settings: Settings) -> Result<(), BoxError> {
    if !settings.bind.ip().is_loopback() && settings.token.is_none() {
        return Err(format!(
            "refusing to serve on {} without an access token: pass --token (or set \
             PGBUS_DASHBOARD_TOKEN), or bind to 127.0.0.1",
            settings.bind
        )
        .into());
    }
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", settings.bind))?;
    let addr = listener.local_addr()?;
    eprintln!("pgbus dashboard on http://{addr}/");
    axum::serve(listener, router(db, settings)).await?;
    Ok(())
}

/// The dashboard's routes, with access and CSRF checks in front of them.
pub(crate) fn router(db: Database, settings: Settings) -> Router {
    let app = Arc::new(App { db, settings });
    Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{id}", get(pages::run))
        .route("/runs/{id}/{action}", post(pages::act))
        .route("/insights", get(pages::insights))
        .route("/style.css", get(style))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(app)
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
}

/// Equal, in constant time.
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Access, then CSRF: the token (if one is set) on every request; on a POST,
/// the form's CSRF token checked by the handler against this cookie, and a
/// cross-origin `Origin` refused here.
async fn guard(
    State(app): State<Arc<App>>,
    jar: CookieJar,
    mut request: Request,
    next: Next,
) -> Response {
    let mut jar = jar;
    if let Some(token) = &app.settings.token {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let cookie = jar.get(TOKEN_COOKIE).map(Cookie::value);
        let query = request
            .uri()
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
        if bearer.is_some_and(|b| same(b, token)) || cookie.is_some_and(|c| same(c, token)) {
            // Let in.
        } else if query.is_some_and(|q| same(q, token)) {
            // Once by link: keep it in a cookie and drop it from the address.
            let path = request.uri().path().to_owned();
            let jar = jar.add(
                Cookie::build((TOKEN_COOKIE, token.clone()))
                    .http_only(true)
                    .same_site(SameSite::Strict)
                    .path("/"),
            );
            return (jar, Redirect::to(&path)).into_response();
        } else {
            return (
                StatusCode::UNAUTHORIZED,
                pages::plain_page(
                    "Access token required",
                    "Open this dashboard with ?token=… or an Authorization: Bearer header.",
                ),
            )
                .into_response();
        }
    }
    if request.method() == axum::http::Method::POST && !same_origin(request.headers()) {
        return (
            StatusCode::FORBIDDEN,
            pages::plain_page("Refused", "A form from another site cannot act here."),
        )
            .into_response();
    }
    let csrf = match jar.get(CSRF_COOKIE) {
        Some(cookie) if cookie.value().len() == 32 => cookie.value().to_owned(),
        _ => {
            let fresh = uuid::Uuid::new_v4().simple().to_string();
            jar = jar.add(
                Cookie::build((CSRF_COOKIE, fresh.clone()))
                    .http_only(true)
                    .same_site(SameSite::Strict)
                    .path("/"),
            );
            fresh
        }
    };
    request.extensions_mut().insert(Csrf(csrf));
    let response = next.run(request).await;
    (jar, response).into_response()
}

/// No `Origin`, or one naming this very host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o == host)
}
