//! The dashboard over plain HTTP: its guards (`guards`), bulk actions
//! (`bulk`), its pages beside
//! held locks, abandoned requests and large runs (`bounds`), the insights
//! page's window, workflow prefix and failures (`insights`), the pages that
//! reload themselves (`live`), the overview at `/` (`overview`), the queues and limits
//! pages (`queues`), reads off the primary (`replica`), a run's long values and errors (`run_page`),
//! the runs list's filters, search and pages (`runs_list`),
//! and the workers page with what the pages say
//! of runs nobody can run (`workers`).

mod bounds;
mod bulk;
mod guards;
mod insights;
mod live;
mod overview;
mod queues;
mod replica;
mod run_page;
mod runs_list;
mod schedules;
mod workers;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;

use pgbus_runtime::prelude::*;

use crate::common::{TestSchema, database_url};

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
