//! The dashboard end to end in headless Chromium (Debian's package; `.ci/run`
//! installs it when missing): the pages render, the timeline chart draws the
//! pieces of a run seeded on a pinned clock, a run no live worker can run
//! shows its banner, a button pauses and another resumes a run, and a
//! screenshot is taken.

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::ScreenshotParams;
use futures_util::StreamExt;
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, Database, ManualClock, RunId, RunStatus};

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

/// Headless Chromium with the flags this machine's closed network needs.
async fn chromium() -> (Browser, tokio::task::JoinHandle<()>, tempdir::Dir) {
    // Where `.ci/deps` found it: on the PATH, as `chromium` or `chromium-browser`.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let executable = std::env::split_paths(&path)
        .flat_map(|dir| [dir.join("chromium"), dir.join("chromium-browser")])
        .find(|p| p.is_file())
        .expect("Chromium is not installed: run .ci/deps (or `apt-get install chromium`)");
    let profile = tempdir::Dir::new();
    let config = BrowserConfig::builder()
        .chrome_executable(executable)
        .no_sandbox()
        .user_data_dir(profile.path())
        .window_size(1280, 900)
        .args([
            "--headless=new",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .build()
        .expect("a browser config");
    let (browser, mut handler) = Browser::launch(config).await.expect("launch Chromium");
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    (browser, events, profile)
}

/// A throwaway profile directory, removed on drop.
mod tempdir {
    pub(crate) struct Dir(std::path::PathBuf);

    impl Dir {
        pub(crate) fn new() -> Self {
            let path = std::env::temp_dir()
                .join(format!("pgbus-chromium-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&path).expect("a profile directory");
            Self(path)
        }

        pub(crate) fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
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

/// Fills in the `action` form of the run page open in `page` and presses
/// its button.
async fn submit(page: &chromiumoxide::Page, action: &str, actor: &str, reason: &str) {
    let form = format!("form.act.{action}");
    for (field, text) in [("actor", actor), ("reason", reason)] {
        page.find_element(format!("{form} input[name={field}]"))
            .await
            .expect("the field")
            .click()
            .await
            .expect("focus")
            .type_str(text)
            .await
            .expect("type");
    }
    page.find_element(format!("{form} button"))
        .await
        .expect("the button")
        .click()
        .await
        .expect("click");
}

/// The text of the notice an action's redirect shows, once the browser has
/// landed there (at most 10 s: the form's post and the redirect take their
/// own time in the browser).
async fn answer(page: &chromiumoxide::Page) -> String {
    for _ in 0..100 {
        if let Ok(notice) = page.find_element("p.notice").await
            && let Ok(Some(text)) = notice.inner_text().await
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let html = page.content().await.unwrap_or_default();
    panic!("no notice after the form: {html}");
}

/// The page of `idle`, a run no live worker can run, has a banner saying
/// so; the workers page lists none (the seeding worker is long silent).
async fn nobody_runs(page: &chromiumoxide::Page, base: &str, idle: RunId) {
    page.goto(format!("{base}/runs/{}", idle.0))
        .await
        .expect("open the run");
    let banner = page
        .find_element("p.banner.stuck")
        .await
        .expect("a banner")
        .inner_text()
        .await
        .expect("its text")
        .unwrap_or_default();
    assert!(
        banner.starts_with("Cannot run: no live worker registered workflow `browser.seeded`"),
        "{banner}"
    );
    page.goto(format!("{base}/workers")).await.expect("workers");
    let html = page.content().await.expect("content");
    assert!(
        html.contains("<h1>Workers</h1>") && html.contains("No live workers"),
        "{html}"
    );
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
    let (browser, events, _profile) = chromium().await;

    // The runs list renders, with both runs.
    let page = browser
        .new_page(format!("{}/", dashboard.url))
        .await
        .expect("open the runs");
    let html = page.content().await.expect("content");
    assert!(html.contains("<h1>Runs</h1>"), "{html}");
    assert!(
        html.contains(&format!("href=\"/runs/{}\"", seeded.0)),
        "{html}"
    );
    // The seeding worker's heartbeat is half an hour old: nothing live runs
    // the idle run, which is marked.
    assert!(html.contains("cannot run: workflow missing"), "{html}");

    // The seeded run's chart: every piece in its row, widths in proportion.
    page.goto(format!("{}/runs/{}", dashboard.url, seeded.0))
        .await
        .expect("open the run");
    let mut bars = Vec::new();
    for rect in page.find_elements("svg.timeline rect").await.expect("bars") {
        let attr = |name: &'static str| {
            let rect = &rect;
            async move {
                rect.attribute(name)
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
    let expected: Vec<(String, String, f64)> = [
        ("reserve#1", "bar queued", 1.0),
        ("reserve#1", "bar ran ended-completed", 2.0),
        ("charge#1", "bar waited", 2.0),
        ("charge#1", "bar queued", 1.0),
        ("charge#1", "bar ran ended-completed", 1.0),
    ]
    .into_iter()
    .map(|(row, class, secs)| (row.to_owned(), class.to_owned(), secs))
    .collect();
    assert_eq!(bars, expected, "bars as (row, class, seconds)");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&shots).expect("a screenshot directory");
    let shot = shots.join("run.png");
    page.save_screenshot(ScreenshotParams::builder().full_page(true).build(), &shot)
        .await
        .expect("a screenshot");
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );

    // A run not yet worked, which no live worker can run, and the workers page.
    nobody_runs(&page, &dashboard.url, idle).await;

    // The pause button pauses it, resume resumes it.
    for (action, after) in [("pause", RunStatus::Paused), ("resume", RunStatus::Ready)] {
        page.goto(format!("{}/runs/{}", dashboard.url, idle.0))
            .await
            .expect("open the run");
        submit(&page, action, "alice", "checking the browser test").await;
        // The form posts, the server redirects back to the run: wait for the
        // page it lands on to show the answer.
        let notice = answer(&page).await;
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

    // Insights render for a window, and a bad one is a clear error page.
    page.goto(format!("{}/insights?window=1h", dashboard.url))
        .await
        .expect("insights");
    let html = page.content().await.expect("content");
    assert!(
        html.contains("Insights, last 1h") && html.contains("browser.seeded"),
        "{html}"
    );

    drop(browser);
    events.abort();
}
