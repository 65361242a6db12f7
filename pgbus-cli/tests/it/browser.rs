//! The dashboard end to end in headless Chromium, driven over W3C WebDriver
//! by a private chromedriver (Debian's `chromium` and `chromium-driver`;
//! `.ci/deps` installs both when missing): the runs list renders and marks a
//! run no live worker can run, the timeline chart draws the pieces of a run
//! seeded on a pinned clock, that run's page shows its banner and the
//! workers page lists no one, a button pauses the run and another resumes
//! it, and the insights page renders for a window and shows an error page
//! for an unknown one. A screenshot is written and checked as a PNG: what the
//! 1280 by 900 window shows, since WebDriver takes the viewport, not the
//! full page. A fleet of workflows is driven through the overview, search,
//! bulk actions, a fan-out family and the pages' reloads in `fleet`.

mod chromedriver;
mod fleet;

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, Locator};
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, Database, ManualClock, RunId, RunStatus};

use self::chromedriver::ChromeDriver;
use crate::common::{Dashboard, TestSchema};

/// Two steps; each moves the pinned clock as if it ran that long, the
/// second one due two seconds after the first ends.
struct Seeded {
    clock: ManualClock,
}

#[workflow(name = "browser.seeded")]
impl Seeded {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {
        self.clock.advance(Duration::from_secs(2));
    }

    #[step(wait = "2s")]
    async fn charge(&self, _cx: &mut StepCx<()>) {
        self.clock.advance(Duration::from_secs(1));
    }
}

/// Runs the seeded workflow to its end on a pinned clock: reserve queued 1 s
/// and ran 2 s; charge waited 2 s, queued 1 s and ran 1 s. Half an hour ago,
/// so the run is in the past yet well inside the insights page's last hour
/// however long the test takes to get there.
async fn seed(t: &TestSchema) -> RunId {
    // Half an hour back: well inside the insights page's 1 h window however
    // long the browser takes (an hour back fell out of it after a few
    // seconds on a loaded machine).
    let clock = ManualClock::new(chrono::Utc::now() - chrono::TimeDelta::minutes(30));
    let pinned = Database::connect_with(
        t.database.url(),
        t.db.schema().clone(),
        Clock::Manual(clock.clone()),
    )
    .await
    .expect("connect");
    let run = pinned
        .client()
        .start::<Seeded>(&())
        .await
        .expect("start")
        .run_id;
    let worker = pinned
        .worker()
        .register(Seeded {
            clock: clock.clone(),
        })
        .build()
        .expect("worker");
    clock.advance(Duration::from_secs(1));
    assert_eq!(worker.run_once().await.expect("run"), 1);
    clock.advance(Duration::from_secs(3));
    assert_eq!(worker.run_once().await.expect("run"), 1);
    run
}

/// Fills in the `action` form of the run page open in `browser` and
/// presses its button.
async fn submit(browser: &Client, action: &str, actor: &str, reason: &str) {
    let form = format!("form.act.{action}");
    for (field, text) in [("actor", actor), ("reason", reason)] {
        let input = browser
            .find(Locator::Css(&format!("{form} input[name={field}]")))
            .await
            .expect("the field");
        input.click().await.expect("focus");
        input.send_keys(text).await.expect("type");
    }
    browser
        .find(Locator::Css(&format!("{form} button")))
        .await
        .expect("the button")
        .click()
        .await
        .expect("click");
}

/// The text of the notice an action's redirect shows, once the browser has
/// landed there (at most 10 s: the form's post and the redirect take their
/// own time in the browser).
async fn answer(browser: &Client) -> String {
    for _ in 0..100 {
        if let Ok(notice) = browser.find(Locator::Css("p.notice")).await
            && let Ok(text) = notice.text().await
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let html = browser.source().await.unwrap_or_default();
    panic!("no notice after the form: {html}");
}

/// Asks `check` every 100 ms until it gives a value, for at most `within`
/// (a bound, never an expected time: a page loads or reloads in its own
/// time in the browser); past it, fails saying `what` was awaited, with the
/// page's address and source.
async fn until<T>(
    browser: &Client,
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        if tokio::time::Instant::now() >= deadline {
            let url = browser.current_url().await.map(String::from);
            let html = browser.source().await.unwrap_or_default();
            panic!("{what}: not within {within:?}; at {url:?}: {html}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Saves what the window shows as `name`.png: into `docs/` when
/// `PGBUS_SCREENSHOTS=docs` (the README's screenshots, made again on
/// purpose), else under the test target directory, so a plain test run
/// changes no tracked file. Checks it is a PNG of some substance.
async fn screenshot(browser: &Client, name: &str) {
    let dir = match std::env::var("PGBUS_SCREENSHOTS").as_deref() {
        Ok("docs") => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs")),
        Ok(other) if !other.is_empty() => {
            panic!("PGBUS_SCREENSHOTS is `docs` or unset, not `{other}`")
        }
        _ => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard"),
    };
    std::fs::create_dir_all(&dir).expect("a screenshot directory");
    let png = browser.screenshot().await.expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{name}: {} bytes",
        png.len()
    );
    std::fs::write(dir.join(format!("{name}.png")), png).expect("write the screenshot");
}

/// The page of `idle`, a run no live worker can run, has a banner saying
/// so; the workers page lists none (the seeding worker is long silent).
async fn nobody_runs(browser: &Client, base: &str, idle: RunId) {
    browser
        .goto(&format!("{base}/runs/{}", idle.0))
        .await
        .expect("open the run");
    let banner = browser
        .find(Locator::Css("p.banner.stuck"))
        .await
        .expect("a banner")
        .text()
        .await
        .expect("its text");
    assert!(
        banner.starts_with("Cannot run: no live worker registered workflow `browser.seeded`"),
        "{banner}"
    );
    browser
        .goto(&format!("{base}/workers"))
        .await
        .expect("workers");
    let html = browser.source().await.expect("source");
    assert!(
        html.contains("<h1>Workers</h1>") && html.contains("No live workers"),
        "{html}"
    );
}

/// The seeded run's chart as (row, class, seconds) for each bar, from the
/// run page open in `browser`: the chart is 900 units wide for 7 s.
async fn bars(browser: &Client) -> Vec<(String, String, f64)> {
    let mut bars = Vec::new();
    let rects = browser
        .find_all(Locator::Css("svg.timeline rect"))
        .await
        .expect("bars");
    for rect in rects {
        let attr = |name: &'static str| {
            let rect = &rect;
            async move {
                rect.attr(name)
                    .await
                    .expect("attribute")
                    .unwrap_or_default()
            }
        };
        let width: f64 = attr("width").await.parse().expect("a width");
        bars.push((
            attr("data-row").await,
            attr("class").await,
            (width / (900.0 / 7.0)).round(),
        ));
    }
    bars
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_draws_a_run_and_its_buttons_pause_and_resume() {
    let t = TestSchema::new().await;
    let seeded = seed(&t).await;
    assert_eq!(t.status(seeded).await, RunStatus::Finished);
    let idle =
        t.db.client()
            .start::<Seeded>(&())
            .await
            .expect("start")
            .run_id;
    let dashboard = Dashboard::start(&t.name, &[]);
    // Dropped after the session, also on a panic: chromedriver and Chromium end.
    let driver = ChromeDriver::start();
    let browser = driver.session().await;

    // The runs list renders, with both runs.
    browser
        .goto(&format!("{}/runs", dashboard.url))
        .await
        .expect("open the runs");
    let html = browser.source().await.expect("source");
    assert!(html.contains("<h1>Runs</h1>"), "{html}");
    assert!(
        html.contains(&format!("href=\"/runs/{}\"", seeded.0)),
        "{html}"
    );
    // The seeding worker's heartbeat is half an hour old: nothing live runs
    // the idle run, which is marked.
    assert!(html.contains("cannot run: workflow missing"), "{html}");

    // The seeded run's chart: every piece in its row, widths in proportion.
    browser
        .goto(&format!("{}/runs/{}", dashboard.url, seeded.0))
        .await
        .expect("open the run");
    let expected: Vec<(String, String, f64)> = [
        // `ran` bars are drawn last, on top of the others.
        ("reserve#1", "bar queued", 1.0),
        ("charge#1", "bar waited", 2.0),
        ("charge#1", "bar queued", 1.0),
        ("reserve#1", "bar ran ended-completed", 2.0),
        ("charge#1", "bar ran ended-completed", 1.0),
    ]
    .into_iter()
    .map(|(row, class, secs)| (row.to_owned(), class.to_owned(), secs))
    .collect();
    assert_eq!(
        bars(&browser).await,
        expected,
        "bars as (row, class, seconds)"
    );
    // The window's screenshot, written where a person can look at it.
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&shots).expect("a screenshot directory");
    let shot = shots.join("run.png");
    let png = browser.screenshot().await.expect("a screenshot");
    std::fs::write(&shot, png).expect("write the screenshot");
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );

    // A run not yet worked, which no live worker can run, and the workers page.
    nobody_runs(&browser, &dashboard.url, idle).await;

    // The pause button pauses it, resume resumes it.
    for (action, after) in [("pause", RunStatus::Paused), ("resume", RunStatus::Ready)] {
        browser
            .goto(&format!("{}/runs/{}", dashboard.url, idle.0))
            .await
            .expect("open the run");
        submit(&browser, action, "alice", "checking the browser test").await;
        // The form posts, the server redirects back to the run: wait for the
        // page it lands on to show the answer.
        let notice = answer(&browser).await;
        assert_eq!(notice, format!("{action}: the run is {after}"));
        assert_eq!(t.status(idle).await, after);
    }
    let view = t.db.client().run(idle).await.expect("run");
    let actors: Vec<(&str, &str)> = view
        .events
        .iter()
        .filter(|e| e.event == "paused" || e.event == "resumed")
        .map(|e| (e.event.as_str(), e.actor.as_str()))
        .collect();
    assert_eq!(
        actors,
        [
            ("paused", "dashboard:alice"),
            ("resumed", "dashboard:alice")
        ]
    );

    // Insights render for a window, and an unknown one is a clear error page.
    browser
        .goto(&format!("{}/insights?window=1h", dashboard.url))
        .await
        .expect("insights");
    let html = browser.source().await.expect("source");
    assert!(
        html.contains("Insights, last 1h") && html.contains("browser.seeded"),
        "{html}"
    );
    browser
        .goto(&format!("{}/insights?window=2h", dashboard.url))
        .await
        .expect("insights for an unknown window");
    let html = browser.source().await.expect("source");
    assert!(
        html.contains("<h1>Something went wrong</h1>")
            && html.contains("Unknown window: use 1h, 24h, 7d or 30d."),
        "{html}"
    );

    browser.close().await.expect("end the session");
    drop(driver);
}
