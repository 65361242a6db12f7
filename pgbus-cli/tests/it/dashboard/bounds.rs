//! The dashboard's pages under pressure: a held lock leaves no query
//! waiting, an abandoned page cancels its query, pages stay bounded beside a
//! run of twenty thousand attempts and a million runs, and notices are words
//! the page knows.

use std::io::Write as _;
use std::net::TcpStream;

use super::{http, plain_run};
use crate::common::{Dashboard, TestSchema};

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
        let pages: Vec<_> = ["/runs", &format!("/runs/{}", run.0), "/insights?window=30d"]
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
        "/runs".to_owned(),
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

/// The dashboard under the load the issue set: a million runs (five
/// workflows, a tenth of them paused and a tenth ready, each of those
/// looked at for the runs list's mark, spread over 30 days) beside one run
/// of 20,001 attempts. Every page, asked all at once, answers 200 within the
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
                CASE WHEN n % 10 = 0 THEN 'paused' WHEN n % 10 = 1 THEN 'ready'
                     ELSE 'finished' END, '{}'::jsonb,
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
        "/runs".to_owned(),
        "/runs?status=paused".to_owned(),
        "/runs?workflow=load.w1&status=finished".to_owned(),
        "/runs?before=500000".to_owned(),
        "/runs?status=ready".to_owned(),
        "/workers".to_owned(),
        "/schedules".to_owned(),
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
