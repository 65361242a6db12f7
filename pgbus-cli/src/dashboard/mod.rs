//! `pgbus dashboard`: the runs, a run's timeline, the insights and the live
//! workers as web pages, rendered on the server (no CDN, no framework: the one
//! stylesheet and the one small script, which reloads pages that change, are
//! built into the binary), with the operator actions as forms.
//!
//! Safe by default: it binds to loopback and asks every request for an access
//! token (`PGBUS_DASHBOARD_TOKEN`, `--token-file` or `--token`; without one,
//! a token made at start whose link it prints, as Jupyter does; `--no-token`
//! serves loopback names only, with none) through an
//! `Authorization: Bearer` header, or `?token=` once, which
//! sets an `HttpOnly` session cookie: an expiry signed with HMAC-SHA256 under
//! a secret of this process, never the token, since cookies ignore ports);
//! wrong tokens are answered one at a time after a pause. With `--no-token`
//! it answers only to a loopback `Host`, against DNS rebinding. Every form
//! carries a CSRF token derived under the secret from the browser's
//! `SameSite=Strict` id cookie (OWASP's signed double-submit pattern), so a
//! page that plants a cookie cannot forge the token; a post must carry this
//! host's `Origin`. Each action is an event with its actor, `dashboard:` and
//! the name the operator typed.
//!
//! Given a read replica (`--replica-url`), pages read it and every action
//! (each POST) goes to the primary; for a few seconds after an action, this
//! browser's pages read the primary (a signed cookie says until when), so
//! the operator sees their change. Each page's header says which it read,
//! and how far behind the replica is.

mod chart;
mod form;
mod pages;
#[cfg(test)]
mod tests;
mod when;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{MethodRouter, get, post};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use pgbus_runtime::Database;
use subtle::ConstantTimeEq;
use tower::ServiceExt as _;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The cookie that stands for the access token once given: an expiry and
/// its HMAC under this process's secret, never the token itself (cookies
/// ignore ports, so any page on another localhost port receives them).
const SESSION_COOKIE: &str = "pgbus_session";
/// How long a session cookie lets a browser in.
const SESSION_FOR: Duration = Duration::from_hours(12);
/// The cookie holding this browser's id, from which its CSRF token is
/// derived under the secret: a page on another port can overwrite the id,
/// but cannot make the token that matches it.
const CSRF_COOKIE: &str = "pgbus_csrf";
/// The cookie that sends this browser's page reads to the primary after an
/// action: an expiry and its HMAC, as the session's.
const WROTE_COOKIE: &str = "pgbus_wrote";
/// How long after an action a browser's pages read the primary, when a
/// replica is given: long enough for the redirect and the first reloads
/// (as Rails' database selector's delay), short enough to keep the reads
/// off the primary.
const READ_PRIMARY_AFTER_ACTION: Duration = Duration::from_secs(10);
/// How long a wrong token holds up the next wrong one, dashboard-wide.
const FAILED_TOKEN_PAUSE: Duration = Duration::from_millis(250);

/// The access token requests must carry.
#[derive(Clone)]
pub(crate) enum Token {
    /// Given by the operator (environment, file or flag).
    Given(String),
    /// Made at start, when none was given: its link is printed.
    Made(String),
    /// None (`--no-token`): loopback names only.
    None,
}

impl Token {
    /// A new token of 32 hex characters (122 random bits, from a version-4
    /// UUID: the OS's random source).
    pub(crate) fn made() -> Self {
        Self::Made(uuid::Uuid::new_v4().simple().to_string())
    }

    fn value(&self) -> Option<&str> {
        match self {
            Self::Given(token) | Self::Made(token) => Some(token),
            Self::None => None,
        }
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Given(_) => "Given(..)",
            Self::Made(_) => "Made(..)",
            Self::None => "None",
        })
    }
}

/// How the dashboard serves.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Where to listen.
    pub(crate) bind: SocketAddr,
    /// The access token.
    pub(crate) token: Token,
    /// The workers' retention age, to cut the insight windows at.
    pub(crate) retention: Option<Duration>,
    /// The origin browsers reach the dashboard at through a reverse proxy
    /// (`https://ops.example.com`), if any: forms from it are this site's,
    /// whatever `Host` the proxy sends; over `https`, cookies are `Secure`
    /// and `__Host-` prefixed.
    pub(crate) public_origin: Option<String>,
    /// How old a heartbeat may be for its worker to count as live: the
    /// workers page, and whether a run's due step has a worker that can run
    /// it (the workers' lost-worker threshold).
    pub(crate) lost_worker_threshold: Duration,
    /// A read replica (`--replica-url`): the pages read it; actions, and
    /// the pages right after one, the primary.
    pub(crate) replica: Option<Database>,
}

impl Settings {
    /// Served to browsers over TLS (by a proxy in front).
    fn secure(&self) -> bool {
        self.public_origin
            .as_deref()
            .is_some_and(|origin| origin.starts_with("https://"))
    }

    /// A cookie's name: `__Host-` prefixed over TLS, so only this origin, on
    /// a secure connection, with path `/` and no domain, can set it.
    fn cookie_name(&self, name: &'static str) -> String {
        if self.secure() {
            format!("__Host-{name}")
        } else {
            name.to_owned()
        }
    }
}

/// What every handler reads.
pub(crate) struct App {
    pub(crate) db: Database,
    pub(crate) settings: Settings,
    /// This process's secret: 32 random bytes, new at every start, so a
    /// restart ends every session and CSRF token.
    secret: [u8; 32],
    /// The bulk actions started from this dashboard, and how far each got
    /// (shared by the primary's and the replica's routes).
    pub(crate) jobs: Arc<pages::Jobs>,
    /// Every presented token waits its turn here; a wrong one holds the
    /// turn for [`FAILED_TOKEN_PAUSE`] in a task of its own, so abandoning
    /// the request does not end the pause.
    failed_tokens: Arc<tokio::sync::Mutex<()>>,
}

impl App {
    fn new(db: Database, settings: Settings) -> Self {
        Self {
            db,
            settings,
            secret: random_secret(),
            jobs: Arc::new(pages::Jobs::default()),
            failed_tokens: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The same dashboard (secret, jobs, settings) reading `db`.
    fn reading(&self, db: Database) -> Self {
        Self {
            db,
            settings: self.settings.clone(),
            secret: self.secret,
            jobs: Arc::clone(&self.jobs),
            failed_tokens: Arc::clone(&self.failed_tokens),
        }
    }

    /// HMAC-SHA256 of `purpose` and `value` under the secret, in hex.
    fn sign(&self, purpose: &str, value: &str) -> String {
        use hmac::{KeyInit as _, Mac as _};
        use std::fmt::Write as _;
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.secret) else {
            return String::new();
        };
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .fold(String::with_capacity(64), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            })
    }

    /// A session cookie's value, good until `SESSION_FOR` from now.
    fn session(&self) -> String {
        self.good_for("session", SESSION_FOR)
    }

    /// Whether `cookie` is a session this process made and still good.
    fn valid_session(&self, cookie: &str) -> bool {
        self.still_good("session", cookie)
    }

    /// A cookie value for `purpose`, good for `span` from now: the expiry
    /// and its HMAC.
    fn good_for(&self, purpose: &str, span: Duration) -> String {
        let until = unix_now().saturating_add(span.as_secs());
        format!("{until}.{}", self.sign(purpose, &until.to_string()))
    }

    /// Whether `cookie` is a [`App::good_for`] value of `purpose` this
    /// process made, not expired.
    fn still_good(&self, purpose: &str, cookie: &str) -> bool {
        let Some((until, mac)) = cookie.split_once('.') else {
            return false;
        };
        let Ok(until_secs) = until.parse::<u64>() else {
            return false;
        };
        until_secs > unix_now() && same(mac, &self.sign(purpose, until))
    }

    /// The CSRF token of the browser whose id is `id`.
    pub(crate) fn csrf_for(&self, id: &str) -> String {
        self.sign("csrf", id)
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// 32 random bytes, from two version-4 UUIDs (the OS's random source).
fn random_secret() -> [u8; 32] {
    let mut secret = [0_u8; 32];
    secret[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    secret[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    secret
}

/// This request's CSRF token (from its cookie, or new), for the forms.
#[derive(Debug, Clone)]
pub(crate) struct Csrf(pub(crate) String);

/// Serves until the process is stopped. Refuses to start on an address that
/// is not loopback without a token.
pub(crate) async fn serve(db: Database, settings: Settings) -> Result<(), BoxError> {
    if !settings.bind.ip().is_loopback() && matches!(settings.token, Token::None) {
        return Err(format!(
            "refusing to serve on {} without an access token: drop --no-token, or bind to \
             127.0.0.1",
            settings.bind
        )
        .into());
    }
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", settings.bind))?;
    let addr = listener.local_addr()?;
    eprintln!("pgbus dashboard on http://{addr}/");
    if let Token::Made(token) = &settings.token {
        // As Jupyter does: the link is the way in, and goes to whoever can
        // read this process's output, not to whoever can reach the port.
        eprintln!(
            "open http://{addr}/?token={token} (a token made for this start; set \
             PGBUS_DASHBOARD_TOKEN or --token-file to keep one)"
        );
    }
    axum::serve(listener, router(db, settings)).await?;
    Ok(())
}

/// The dashboard's routes, with access and CSRF checks in front of them.
pub(crate) fn router(db: Database, settings: Settings) -> Router {
    routes(&Arc::new(App::new(db, settings)))
}

/// Every route that takes a form, the one place POST routes are made: each
/// handler takes its body as a [`form::CsrfForm`], and the guard refuses a
/// foreign `Origin` first. The guard test walks this list.
pub(crate) fn form_routes() -> Vec<(&'static str, MethodRouter<Arc<App>>)> {
    vec![
        ("/runs/{id}/{action}", post(pages::act)),
        ("/bulk", post(pages::bulk_apply)),
    ]
}

/// Every route, behind the guard; a request goes to the routes reading the
/// primary or the replica by [`read_or_write`].
fn routes(app: &Arc<App>) -> Router {
    let primary = pages_on(Arc::clone(app));
    let replica = app
        .settings
        .replica
        .clone()
        .map(|db| Arc::new(app.reading(db)));
    let replica = replica.map(|read| (Arc::clone(&read), pages_on(read)));
    let chosen = Arc::clone(app);
    let choose = tower::service_fn(move |request: Request| {
        let (app, primary, replica) = (Arc::clone(&chosen), primary.clone(), replica.clone());
        async move { Ok::<_, Infallible>(read_or_write(&app, primary, replica, request).await) }
    });
    Router::new()
        .fallback_service(choose)
        .layer(middleware::from_fn_with_state(Arc::clone(app), guard))
}

/// Which database served a page, as its header says.
#[derive(Debug, Clone)]
enum Source {
    /// The primary: no replica was given.
    Primary,
    /// The primary, for this browser's pages right after an action.
    AfterAction,
    /// The replica, with its lag (or why it could not be read).
    Replica(Result<pgbus_runtime::ReplicaLag, String>),
}

/// Sends `request` to the routes reading the primary or the replica: with
/// no replica, the primary; an action (anything but `GET` and `HEAD`)
/// always the primary, after which this browser's pages read the primary
/// for [`READ_PRIMARY_AFTER_ACTION`]; any other page the replica. The page
/// says which in its header ([`pages::source_line`]).
async fn read_or_write(
    app: &App,
    primary: Router,
    replica: Option<(Arc<App>, Router)>,
    request: Request,
) -> Response {
    let Some((read, replica)) = replica else {
        return with_source(primary, request, Some(Source::Primary)).await;
    };
    let method = request.method().clone();
    if method != axum::http::Method::GET && method != axum::http::Method::HEAD {
        let response = with_source(primary, request, Some(Source::AfterAction)).await;
        // A refused form (a bad CSRF token, an unknown run) is answered
        // without a redirect: it changed nothing to see.
        if !response.status().is_redirection() {
            return response;
        }
        let cookie = Cookie::build((
            app.settings.cookie_name(WROTE_COOKIE),
            app.good_for("wrote", READ_PRIMARY_AFTER_ACTION),
        ))
        .http_only(true)
        .secure(app.settings.secure())
        .same_site(SameSite::Lax)
        .path("/");
        // A session cookie: its value carries its expiry, checked here.
        return (CookieJar::new().add(cookie), response).into_response();
    }
    let jar = CookieJar::from_headers(request.headers());
    let wrote = jar
        .get(&app.settings.cookie_name(WROTE_COOKIE))
        .is_some_and(|c| app.still_good("wrote", c.value()));
    if wrote {
        return with_source(primary, request, Some(Source::AfterAction)).await;
    }
    // The stylesheet and the script are the binary's: no database read.
    let page = !matches!(request.uri().path(), "/style.css" | "/refresh.js");
    let source = if page {
        Some(Source::Replica(
            read.db
                .client()
                .replica_lag()
                .await
                .map_err(|e| crate::commands::chain(&e)),
        ))
    } else {
        None
    };
    with_source(replica, request, source).await
}

/// `routes`' answer to `request`, its page's header saying `source`: the
/// frame leaves an empty mark there ([`pages::SOURCE_MARK`]), filled here
/// (the run page is drawn off the request's task, so the frame cannot
/// know).
async fn with_source(routes: Router, request: Request, source: Option<Source>) -> Response {
    let Ok(response) = routes.oneshot(request).await;
    let Some(source) = source else {
        return response;
    };
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if !html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page could not be read",
        )
            .into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let filled = text.replacen(
        pages::SOURCE_MARK,
        &pages::source_line(&source).into_string(),
        1,
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(filled))
}

/// The pages and forms, reading `app`'s database, with no guard (the
/// guard is in front of both sets).
fn pages_on(app: Arc<App>) -> Router {
    let forms = form_routes()
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router.route(path, route)
        });
    forms
        .route("/", get(pages::overview))
        .route("/runs", get(pages::runs))
        .route("/queues", get(pages::queues))
        .route("/limits", get(pages::limits))
        .route("/runs/{id}", get(pages::run))
        .route("/bulk", get(pages::bulk_confirm))
        .route("/bulk/{job}", get(pages::bulk_progress))
        .route("/insights", get(pages::insights))
        .route("/workers", get(pages::workers))
        .route("/schedules", get(pages::schedules))
        .route("/style.css", get(style))
        .route("/refresh.js", get(refresh))
        .fallback(pages::not_found)
        .with_state(app)
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
}

/// The script that reloads a page carrying `data-refresh` (see
/// `refresh.js`); the only script, loaded from this site (the CSP allows no
/// inline script).
async fn refresh() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("refresh.js"),
    )
}

/// Equal, in constant time: the SHA-256 digests are compared, so neither the
/// contents nor the length of a secret shows in the time taken.
fn same(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    Sha256::digest(a.as_bytes())
        .ct_eq(&Sha256::digest(b.as_bytes()))
        .into()
}

/// How long a page may take before the dashboard answers 504 (a database that
/// stopped answering must not hang every request).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Access, then CSRF, then the answer with the security headers: the token
/// (if one is set) on every request, else a loopback `Host` (against DNS
/// rebinding: a page of another site resolving its name to 127.0.0.1); on a
/// POST, a cross-origin `Origin` refused here, and the form's CSRF token
/// checked against this browser's cookie by [`form::CsrfForm`], through
/// which every POST handler takes its body.
async fn guard(
    State(app): State<Arc<App>>,
    jar: CookieJar,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(token) = app.settings.token.value() {
        // The scheme name is case-insensitive (RFC 9110).
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, value)| value.trim());
        let session_name = app.settings.cookie_name(SESSION_COOKIE);
        // A presented token (a header or a link) is judged only in its turn,
        // after any wrong one's pause: guesses run one at a time, at most
        // four a second however many are sent at once.
        let presented =
            bearer.is_some() || request.uri().query().is_some_and(|q| q.contains("token="));
        if presented {
            drop(app.failed_tokens.lock().await);
        }
        let session = jar.get(&session_name).map(Cookie::value);
        // A link with the token is answered first, even with the cookie
        // already set, so the token never stays in the address bar.
        if let Some(to) = link_with_token(&request, token) {
            // Once by link: a session cookie stands for it (`Lax`, so a link
            // from a chat or a wiki works; forms have their own CSRF check),
            // and the token leaves the address.
            let jar = jar.add(
                Cookie::build((session_name, app.session()))
                    .http_only(true)
                    .secure(app.settings.secure())
                    .same_site(SameSite::Lax)
                    .path("/"),
            );
            return secured((jar, Redirect::to(&to)).into_response());
        } else if bearer.is_some_and(|b| same(b, token))
            || session.is_some_and(|s| app.valid_session(s))
        {
            // Let in.
        } else {
            if presented {
                // This wrong token holds the turn for a moment, in a task
                // of its own: a guesser that gives up does not cut it short.
                let turn = Arc::clone(&app.failed_tokens).lock_owned().await;
                tokio::spawn(async move {
                    tokio::time::sleep(FAILED_TOKEN_PAUSE).await;
                    drop(turn);
                });
            }
            return secured(
                (
                    StatusCode::UNAUTHORIZED,
                    pages::plain_page(
                        "Access token required",
                        "Open this dashboard with ?token=… or an Authorization: Bearer header.",
                    ),
                )
                    .into_response(),
            );
        }
    } else if !loopback_host(request.headers(), app.settings.bind) {
        return secured(
            (
                StatusCode::MISDIRECTED_REQUEST,
                pages::plain_page(
                    "Refused",
                    "This dashboard answers to its loopback address only (or give it a token).",
                ),
            )
                .into_response(),
        );
    }
    if request.method() == axum::http::Method::POST
        && !same_origin(request.headers(), app.settings.public_origin.as_deref())
    {
        return secured(
            (
                StatusCode::FORBIDDEN,
                pages::plain_page("Refused", "A form from another site cannot act here."),
            )
                .into_response(),
        );
    }
    let (jar, id) = browser_id(&app, jar);
    request.extensions_mut().insert(Csrf(app.csrf_for(&id)));
    // Only a form acts; a page that timed out changed nothing.
    let acts = request.method() == axum::http::Method::POST;
    let response = match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            pages::plain_page(
                "The page took too long",
                if acts {
                    "No answer within 15 seconds (a database that does not answer); it \
                     gave up. The action may or may not have been applied: look at the \
                     run before trying it again."
                } else {
                    "No page within 15 seconds (a database that does not answer, or a \
                     page too large to draw); it gave up. Nothing was changed: reading a \
                     page never acts."
                },
            ),
        )
            .into_response(),
    };
    secured((jar, response).into_response())
}

/// This browser's id, from its CSRF cookie, or a new one set in the jar.
fn browser_id(app: &App, jar: CookieJar) -> (CookieJar, String) {
    let name = app.settings.cookie_name(CSRF_COOKIE);
    match jar.get(&name) {
        Some(cookie) if cookie.value().len() == 32 => {
            let id = cookie.value().to_owned();
            (jar, id)
        }
        _ => {
            let fresh = uuid::Uuid::new_v4().simple().to_string();
            let jar = jar.add(
                Cookie::build((name, fresh.clone()))
                    .http_only(true)
                    .secure(app.settings.secure())
                    .same_site(SameSite::Strict)
                    .path("/"),
            );
            (jar, fresh)
        }
    }
}

/// Where a GET carrying the right `?token=` goes once the token is in a
/// cookie: the same path (never another host's) with its other parameters.
fn link_with_token(request: &Request, token: &str) -> Option<String> {
    if request.method() != axum::http::Method::GET {
        return None;
    }
    let query = request.uri().query()?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
    if !pairs.iter().any(|(k, v)| k == "token" && same(v, token)) {
        return None;
    }
    let rest: Vec<&(String, String)> = pairs.iter().filter(|(k, _)| k != "token").collect();
    let path = request.uri().path();
    // `//host/...` (or `/\host`, which browsers read the same) would leave
    // this site.
    let path = if path.starts_with("//") || path.starts_with("/\\") || !path.starts_with('/') {
        "/"
    } else {
        path
    };
    let rest = serde_urlencoded::to_string(rest).unwrap_or_default();
    Some(if rest.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{rest}")
    })
}

/// The `Host` names this dashboard: a loopback name or address, or the
/// address it is bound to.
fn loopback_host(headers: &HeaderMap, bind: SocketAddr) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    // Drop the port: `[::1]:8080`, `127.0.0.1:8080`, `localhost:8080`.
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == bind.ip())
}

/// `response` with the headers that keep the pages to themselves: nothing
/// but this site's stylesheet and script loads (no inline script, no
/// `eval`), no site may frame them, no referrer leaves them for another
/// site.
fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, axum::http::HeaderValue::from_static(value));
    }
    response
}

/// An `Origin` naming this very host, or the configured public origin (a
/// reverse proxy may rewrite `Host`). Browsers send one with every form post;
/// a post without one is not from a page of this dashboard.
fn same_origin(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    if public_origin.is_some_and(|public| public.eq_ignore_ascii_case(origin)) {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o == host)
}
