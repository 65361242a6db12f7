//! A small fleet in Chromium (issue 23): two onboarding workflows and a
//! billing one with an hour of finished history, a month-end run whose
//! fan-out started billing children, runs ready and paused with
//! idempotency keys and JSON inputs. The overview's counts lead to exactly
//! the runs they count; the search box finds a key, a run id and a JSON
//! path, and the workflow box a prefix; a bulk cancel is confirmed by
//! count, name and reason and touches only its runs; a parent and its
//! children link both ways; the overview reloads itself while shown and
//! not while hidden. The README's screenshots are taken here
//! ([`super::screenshot`]).

use std::collections::BTreeSet;
use std::time::Duration;

use fantoccini::{Client, Locator};
use pgbus_runtime::prelude::*;
use pgbus_runtime::view::RunFilter;
use pgbus_runtime::{Clock, Database, ManualClock, RunId, RunStatus, StartOptions, Worker};
use serde::{Deserialize, Serialize};

use super::chromedriver::ChromeDriver;
use super::{screenshot, until};
use crate::common::{Dashboard, TestSchema};

/// How long a page may take to load, or a form's post and its redirect.
const LOADS: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Signup {
    customer: String,
    email: String,
    plan: String,
}

impl Signup {
    fn of(customer: &str, plan: &str) -> Self {
        Self {
            customer: customer.to_owned(),
            email: format!("ops@{customer}.example"),
            plan: plan.to_owned(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Invoice {
    customer: String,
    amount_cents: u64,
    currency: String,
}

impl Invoice {
    fn of(customer: &str, amount_cents: u64) -> Self {
        Self {
            customer: customer.to_owned(),
            amount_cents,
            currency: "EUR".to_owned(),
        }
    }
}

/// Moves a pinned clock as if a step ran that long; without one (the
/// database's clock) it does nothing.
#[derive(Clone, Default)]
struct Takes(Option<ManualClock>);

impl Takes {
    fn ms(&self, ms: u64) {
        if let Some(clock) = &self.0 {
            clock.advance(Duration::from_millis(ms));
        }
    }
}

struct Welcome(Takes);

#[workflow(name = "onboarding.welcome", input = Signup, queue = "onboarding")]
impl Welcome {
    #[step]
    async fn send_welcome(&self, _cx: &mut StepCx<Signup>) {
        self.0.ms(400);
    }

    #[step]
    async fn schedule_tips(&self, _cx: &mut StepCx<Signup>) {
        self.0.ms(150);
    }
}

struct Verify(Takes);

#[workflow(name = "onboarding.verify", input = Signup, queue = "onboarding")]
impl Verify {
    #[step]
    async fn send_code(&self, _cx: &mut StepCx<Signup>) {
        self.0.ms(300);
    }

    #[step]
    async fn check_domain(&self, _cx: &mut StepCx<Signup>) {
        self.0.ms(900);
    }
}

struct Charge(Takes);

#[workflow(name = "billing.charge", input = Invoice, queue = "billing")]
impl Charge {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<Invoice>) {
        self.0.ms(1_200);
    }

    #[step(wait = "3s")]
    async fn capture(&self, _cx: &mut StepCx<Invoice>) {
        self.0.ms(2_100);
    }

    #[step]
    async fn send_receipt(&self, _cx: &mut StepCx<Invoice>) {
        self.0.ms(300);
    }
}

/// Charges each invoice in a child run, then closes the month.
struct MonthEnd;

#[workflow(name = "billing.month_end", input = Vec<Invoice>, queue = "billing")]
impl MonthEnd {
    #[fan_out]
    async fn charge_each(&self, cx: &mut StepCx<Vec<Invoice>>, fan: &mut FanOut) -> StepResult {
        for invoice in cx.input().clone() {
            fan.start::<Charge>(&invoice)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn close_books(&self, _cx: &mut StepCx<Vec<Invoice>>) {}
}

/// Customers of the finished history; `umbrella` is kept out of it, so a
/// path search for it finds the two runs started for it now.
const CUSTOMERS: [&str; 8] = [
    "acme", "globex", "initech", "hooli", "stark", "wayne", "wonka", "tyrell",
];

/// The seeded fleet, on its own schema, with the runs the tests name.
struct Fleet {
    t: TestSchema,
    /// Registered for every workflow on the database clock, never run: the
    /// runs have a live worker, as in a real fleet (no "cannot run" marks).
    live: Worker,
    /// A finished charge, for the timeline.
    charged: RunId,
    /// The month-end run waiting for its children.
    parent: RunId,
    children: Vec<RunId>,
    /// The welcome started with key `signup-initech`.
    keyed: RunId,
    /// The two runs whose input has `"customer": "umbrella"`.
    umbrella: Vec<RunId>,
    /// A paused verification.
    paused: RunId,
}

impl Fleet {
    async fn seed() -> Self {
        let t = TestSchema::new().await;
        let charged = history(&t).await;
        let client = t.db.client();
        let live =
            t.db.worker()
                .register(Welcome(Takes::default()))
                .register(Verify(Takes::default()))
                .register(Charge(Takes::default()))
                .register(MonthEnd)
                .build()
                .expect("worker");

        // The month-end fan-out, run by a worker of its own (the live one
        // would go on to charge the children).
        let invoices: Vec<Invoice> = [("acme", 129_900), ("globex", 48_000), ("hooli", 9_900)]
            .iter()
            .map(|(c, a)| Invoice::of(c, *a))
            .collect();
        let parent = client
            .start_with::<MonthEnd>(&invoices, &StartOptions::new().key("month-end-2026-11"))
            .await
            .expect("start")
            .run_id;
        let fan = t.db.worker().register(MonthEnd).build().expect("worker");
        fan.run_until_idle().await.expect("the fan-out ran");
        let children: Vec<RunId> = client
            .list_runs(&RunFilter::new().parent(parent))
            .await
            .expect("children")
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(children.len(), 3);

        let start = async |key: &str, signup: Signup| -> RunId {
            client
                .start_with::<Welcome>(&signup, &StartOptions::new().key(key))
                .await
                .expect("start")
                .run_id
        };
        let _ = start("signup-acme", Signup::of("acme", "team")).await;
        let keyed = start("signup-initech", Signup::of("initech", "enterprise")).await;
        let umbrella_welcome = start("signup-umbrella", Signup::of("umbrella", "team")).await;
        let welcome_paused = start("signup-wonka", Signup::of("wonka", "starter")).await;
        let mut verify = Vec::new();
        for (customer, plan) in [
            ("globex", "team"),
            ("stark", "enterprise"),
            ("tyrell", "team"),
            ("wayne", "starter"),
        ] {
            let run = client
                .start_with::<Verify>(
                    &Signup::of(customer, plan),
                    &StartOptions::new().key(format!("verify-{customer}")),
                )
                .await
                .expect("start")
                .run_id;
            verify.push(run);
        }
        let mut charges = Vec::new();
        for (customer, cents) in [
            ("initech", 15_000),
            ("stark", 240_000),
            ("umbrella", 72_500),
        ] {
            let run = client
                .start_with::<Charge>(
                    &Invoice::of(customer, cents),
                    &StartOptions::new().key(format!("invoice-{customer}-2026-12")),
                )
                .await
                .expect("start")
                .run_id;
            charges.push(run);
        }
        // Paused by operators: a welcome, two verifications, a charge.
        for (run, reason) in [
            (welcome_paused, "customer asked to hold the welcome mail"),
            (verify[2], "domain under review"),
            (verify[3], "waiting for the customer's DNS change"),
            (charges[2], "card disputed; hold until the bank answers"),
        ] {
            client
                .pause(run, "ops:maria", reason)
                .await
                .expect("paused");
        }
        let fleet = Self {
            t,
            live,
            charged,
            parent,
            children,
            keyed,
            umbrella: vec![umbrella_welcome, charges[2]],
            paused: verify[3],
        };
        fleet.beat().await;
        fleet
    }

    /// The live worker's heartbeat, refreshed: its runs show no "cannot
    /// run" mark however long the test has taken.
    async fn beat(&self) {
        self.live.heartbeat().await.expect("heartbeat");
    }

    /// The runs of `workflow` (exactly) in `status`, children too.
    async fn runs(&self, workflow: &str, status: RunStatus) -> BTreeSet<i64> {
        self.listed(RunFilter::new().workflow(workflow).status(status))
            .await
    }

    /// Each of `ids` with its status now.
    async fn statuses(&self, ids: impl IntoIterator<Item = &i64>) -> Vec<(i64, RunStatus)> {
        let mut statuses = Vec::new();
        for id in ids {
            statuses.push((*id, self.t.status(RunId(*id)).await));
        }
        statuses
    }

    async fn listed(&self, filter: RunFilter) -> BTreeSet<i64> {
        self.t
            .db
            .client()
            .list_runs(&filter.limit(1_000))
            .await
            .expect("runs")
            .iter()
            .map(|r| r.id.0)
            .collect()
    }
}

/// The last hour's finished runs, on a clock pinned 50 minutes back and
/// moved on a few minutes at a time: a welcome, a verification and a charge
/// per customer. Returns the last charge.
async fn history(t: &TestSchema) -> RunId {
    let clock = ManualClock::new(chrono::Utc::now() - chrono::TimeDelta::minutes(50));
    let pinned = Database::connect_with(
        t.database.url(),
        t.db.schema().clone(),
        Clock::Manual(clock.clone()),
    )
    .await
    .expect("connect");
    let takes = Takes(Some(clock.clone()));
    let worker = pinned
        .worker()
        .register(Welcome(takes.clone()))
        .register(Verify(takes.clone()))
        .register(Charge(takes))
        .build()
        .expect("worker");
    let client = pinned.client();
    let mut charged = None;
    for (n, customer) in CUSTOMERS.iter().enumerate() {
        let plan = ["starter", "team", "enterprise"][n % 3];
        client
            .start::<Welcome>(&Signup::of(customer, plan))
            .await
            .expect("start");
        clock.advance(Duration::from_secs(40));
        client
            .start::<Verify>(&Signup::of(customer, plan))
            .await
            .expect("start");
        let amount = 4_900 + 10_000 * u64::try_from(n).unwrap_or(0);
        charged = Some(
            client
                .start::<Charge>(&Invoice::of(customer, amount))
                .await
                .expect("start")
                .run_id,
        );
        clock.advance(Duration::from_millis(700));
        worker.run_until_idle().await.expect("run");
        // The charge's capture waits 3 s after its reservation.
        clock.advance(Duration::from_secs(4));
        worker.run_until_idle().await.expect("run");
        clock.advance(Duration::from_mins(5));
    }
    let charged = charged.expect("a charge");
    let view = t.db.client().run(charged).await.expect("run");
    assert_eq!(view.run.status, RunStatus::Finished);
    charged
}

/// The runs list's rows on the page: (id, workflow, status).
async fn rows(browser: &Client) -> Option<Vec<(i64, String, String)>> {
    let script = "return Array.from(document.querySelectorAll('table.runs tbody tr')).map(function (tr) {
        var badge = tr.cells[2].querySelector('.badge');
        return [Number(tr.cells[0].textContent), tr.cells[1].textContent, badge ? badge.textContent : ''];
    });";
    let found = browser.execute(script, Vec::new()).await.ok()?;
    serde_json::from_value(found).ok()
}

/// The ids of the rows once the runs list shows them (or says no runs
/// match) at an address whose query has every pair of `query` (a form
/// sends its empty fields too).
async fn listed_at(browser: &Client, query: &[(&str, &str)]) -> BTreeSet<i64> {
    until(
        browser,
        &format!("the runs list of {query:?}"),
        LOADS,
        async || {
            let url = browser.current_url().await.ok()?;
            let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            let here = url.path() == "/runs"
                && query
                    .iter()
                    .all(|(n, v)| pairs.iter().any(|(name, value)| name == n && value == v));
            if !here {
                return None;
            }
            let rows = rows(browser).await?;
            let empty = browser.find(Locator::Css("p.empty")).await.is_ok();
            (!rows.is_empty() || empty).then(|| rows.iter().map(|r| r.0).collect())
        },
    )
    .await
}

/// Waits for the page at `path` (exactly) to be loaded.
async fn landed(browser: &Client, path: &str) {
    until(browser, &format!("the page {path}"), LOADS, async || {
        let url = browser.current_url().await.ok()?;
        let ready = browser
            .execute("return document.readyState", Vec::new())
            .await
            .ok()?;
        (url.path() == path && ready == "complete").then_some(())
    })
    .await;
}

/// Clicks what `css` finds.
async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Types `text` into the field `css` finds, emptied first.
async fn type_into(browser: &Client, css: &str, text: &str) {
    let field = browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    field.click().await.expect("focus");
    field.clear().await.expect("empty");
    field.send_keys(text).await.expect("type");
}

/// Types `text` into the runs list's search box and sends the form.
async fn search(browser: &Client, base: &str, text: &str) {
    browser
        .goto(&format!("{base}/runs"))
        .await
        .expect("the runs");
    type_into(browser, "form.filters input[name=q]", text).await;
    click(browser, "form.filters button[type=submit]").await;
}

/// The overview's "runs now" table: workflow -> (ready, performing, paused).
async fn overview_counts(browser: &Client) -> Option<Vec<(String, String, String, String)>> {
    let script = "return Array.from(document.querySelectorAll('table.workflows-now tbody tr')).map(function (tr) {
        return Array.from(tr.cells).map(function (td) { return td.textContent; });
    });";
    let found = browser.execute(script, Vec::new()).await.ok()?;
    let rows: Vec<Vec<String>> = serde_json::from_value(found).ok()?;
    rows.into_iter()
        .map(|r| match r.as_slice() {
            [w, a, b, c] => Some((w.clone(), a.clone(), b.clone(), c.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_and_the_search_find_the_runs_and_a_family_links_both_ways() {
    let fleet = Fleet::seed().await;
    let dashboard = Dashboard::start(&fleet.t.name, &[]);
    let base = dashboard.url.as_str();
    let driver = ChromeDriver::start();
    let browser = driver.session().await;
    overview_counts_lead_to_their_runs(&browser, base, &fleet).await;
    search_finds_keys_ids_paths_and_prefixes(&browser, base, &fleet).await;
    family_links_both_ways(&browser, base, &fleet).await;
    browser.close().await.expect("end the session");
    drop(driver);
}

/// The overview: each workflow with its runs now, as the database has
/// them, and each count a link to exactly those runs.
async fn overview_counts_lead_to_their_runs(browser: &Client, base: &str, fleet: &Fleet) {
    browser.goto(&format!("{base}/")).await.expect("overview");
    let counts = until(browser, "the overview's counts", LOADS, async || {
        overview_counts(browser).await.filter(|c| !c.is_empty())
    })
    .await;
    let mut expected = Vec::new();
    for workflow in [
        "billing.charge",
        "billing.month_end",
        "onboarding.verify",
        "onboarding.welcome",
    ] {
        let mut row = vec![workflow.to_owned()];
        for status in [RunStatus::Ready, RunStatus::Performing, RunStatus::Paused] {
            row.push(fleet.runs(workflow, status).await.len().to_string());
        }
        expected.push((
            row[0].clone(),
            row[1].clone(),
            row[2].clone(),
            row[3].clone(),
        ));
    }
    assert_eq!(counts, expected, "(workflow, ready, performing, paused)");
    // Two top-level charges and the three children ready; three welcomes.
    assert_eq!(counts[0].1, "5");
    assert_eq!(counts[3].1, "3");
    fleet.beat().await;
    screenshot(browser, "dashboard-overview").await;

    // Each count opens the list of exactly the runs it counts (the
    // charges' ready count includes the month-end run's children).
    for (workflow, status, column) in [
        ("onboarding.welcome", RunStatus::Ready, 2),
        ("onboarding.verify", RunStatus::Paused, 4),
        ("billing.charge", RunStatus::Ready, 2),
    ] {
        browser.goto(&format!("{base}/")).await.expect("overview");
        let count = format!(
            "//table[contains(@class, 'workflows-now')]//tr[td[1] = '{workflow}']/td[{column}]/a"
        );
        browser
            .find(Locator::XPath(&count))
            .await
            .unwrap_or_else(|e| panic!("{count}: {e}"))
            .click()
            .await
            .expect("click");
        let shown = listed_at(
            browser,
            &[("workflow", workflow), ("status", status.as_str())],
        )
        .await;
        assert_eq!(
            shown,
            fleet.runs(workflow, status).await,
            "{workflow} {status}"
        );
        let rows = rows(browser).await.expect("rows");
        assert!(
            rows.iter()
                .all(|(_, w, s)| w == workflow && s == status.as_str()),
            "{rows:?}"
        );
    }
}

/// The search box finds an idempotency key's run, goes to a run by its id,
/// lists the runs a JSON path matches; the workflow box is a prefix.
async fn search_finds_keys_ids_paths_and_prefixes(browser: &Client, base: &str, fleet: &Fleet) {
    search(browser, base, "signup-initech").await;
    let shown = listed_at(browser, &[("q", "signup-initech")]).await;
    assert_eq!(shown, BTreeSet::from([fleet.keyed.0]));

    // A run's id goes to its page.
    search(browser, base, &fleet.paused.0.to_string()).await;
    landed(browser, &format!("/runs/{}", fleet.paused.0)).await;
    let h1 = browser
        .find(Locator::Css("h1"))
        .await
        .expect("a title")
        .text()
        .await
        .expect("its text");
    assert_eq!(h1, format!("Run {}", fleet.paused.0));

    // A JSON path on the input lists the runs it matches.
    let path = r#"$.customer ? (@ == "umbrella")"#;
    search(browser, base, path).await;
    let shown = listed_at(browser, &[("q", path)]).await;
    assert_eq!(shown, fleet.umbrella.iter().map(|r| r.0).collect());
    assert_eq!(
        shown,
        fleet
            .listed(RunFilter::new().top_level().input_path(path))
            .await
    );

    // The workflow box is a prefix: both onboarding workflows' runs.
    browser
        .goto(&format!("{base}/runs"))
        .await
        .expect("the runs");
    type_into(browser, "form.filters input[name=workflow]", "onboarding").await;
    click(browser, "form.filters button[type=submit]").await;
    let shown = listed_at(browser, &[("workflow", "onboarding")]).await;
    assert_eq!(
        shown,
        fleet
            .listed(RunFilter::new().top_level().workflow_prefix("onboarding"))
            .await
    );
    let workflows: BTreeSet<String> = rows(browser)
        .await
        .expect("rows")
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(
        workflows,
        BTreeSet::from([
            "onboarding.verify".to_owned(),
            "onboarding.welcome".to_owned()
        ])
    );
    fleet.beat().await;
    screenshot(browser, "dashboard-runs").await;
}

/// A parent's page links to its children's list, a child's to its parent;
/// and a finished charge's timeline.
async fn family_links_both_ways(browser: &Client, base: &str, fleet: &Fleet) {
    let parent = fleet.parent.0;
    browser
        .goto(&format!("{base}/runs/{parent}"))
        .await
        .expect("the parent");
    landed(browser, &format!("/runs/{parent}")).await;
    fleet.beat().await;
    screenshot(browser, "dashboard-run-family").await;
    click(browser, "dd.children a").await;
    let shown = listed_at(browser, &[("parent", &parent.to_string())]).await;
    assert_eq!(shown, fleet.children.iter().map(|r| r.0).collect());
    let child = fleet.children[0].0;
    click(browser, &format!("table.runs a[href=\"/runs/{child}\"]")).await;
    landed(browser, &format!("/runs/{child}")).await;
    let up = browser
        .find(Locator::Css("dd.parent a"))
        .await
        .expect("the parent link");
    assert_eq!(up.text().await.expect("its text"), format!("run {parent}"));
    up.click().await.expect("click");
    landed(browser, &format!("/runs/{parent}")).await;

    // A finished charge's timeline, the README's first screenshot.
    browser
        .goto(&format!("{base}/runs/{}", fleet.charged.0))
        .await
        .expect("the charge");
    until(browser, "the timeline", LOADS, async || {
        let bars = browser
            .find_all(Locator::Css("svg.timeline rect"))
            .await
            .ok()?;
        (bars.len() >= 3).then_some(())
    })
    .await;
    screenshot(browser, "dashboard").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_cancel_is_confirmed_by_count_and_touches_only_its_runs() {
    let fleet = Fleet::seed().await;
    let dashboard = Dashboard::start(&fleet.t.name, &[]);
    let base = dashboard.url.as_str();
    let driver = ChromeDriver::start();
    let browser = driver.session().await;
    let chosen = fleet.runs("onboarding.welcome", RunStatus::Ready).await;
    assert_eq!(chosen.len(), 3);
    let onboarding = fleet
        .listed(RunFilter::new().workflow_prefix("onboarding"))
        .await;
    let others = fleet.statuses(onboarding.difference(&chosen)).await;

    // Filter by workflow and status through the form.
    browser
        .goto(&format!("{base}/runs"))
        .await
        .expect("the runs");
    let (workflow, status) = (
        "form.filters input[name=workflow]",
        "form.filters select[name=status]",
    );
    type_into(&browser, workflow, "onboarding.welcome").await;
    click(&browser, &format!("{status} option[value=ready]")).await;
    click(&browser, "form.filters button[type=submit]").await;
    let shown = listed_at(
        &browser,
        &[("workflow", "onboarding.welcome"), ("status", "ready")],
    )
    .await;
    assert_eq!(shown, chosen);

    // "Cancel these…": the confirmation names how many.
    let offer = browser
        .find(Locator::Css("p.bulk a.bulk"))
        .await
        .expect("a bulk action");
    assert_eq!(offer.text().await.expect("its text"), "Cancel these…");
    offer.click().await.expect("click");
    landed(&browser, "/bulk").await;
    let count = browser
        .find(Locator::Css("p.count"))
        .await
        .expect("the count")
        .text()
        .await
        .expect("its text");
    assert!(
        count.starts_with(
            "3 runs match: the ready runs (top-level, of workflows starting with onboarding.welcome), runs "
        ),
        "{count}"
    );
    let form = "form.act.bulk.cancel";
    type_into(&browser, &format!("{form} input[name=actor]"), "maria").await;
    type_into(
        &browser,
        &format!("{form} input[name=reason]"),
        "duplicate signups from the CRM import",
    )
    .await;
    let button = browser
        .find(Locator::Css(&format!("{form} button")))
        .await
        .expect("the button");
    assert_eq!(
        button.text().await.expect("its text"),
        "Cancel these 3 runs"
    );
    fleet.beat().await;
    screenshot(&browser, "dashboard-bulk-confirm").await;
    button.click().await.expect("confirm");

    // The job's page follows it to the end.
    assert_eq!(bulk_done(&browser).await, "Done: 3 of 3 runs cancelled.");

    // Cancelled with the name and reason given; the rest as they were.
    let client = fleet.t.db.client();
    for id in &chosen {
        let view = client.run(RunId(*id)).await.expect("run");
        assert_eq!(view.run.status, RunStatus::Cancelled, "run {id}");
        let cancelled: Vec<(&str, &str)> = view
            .events
            .iter()
            .filter(|e| e.event == "cancelled")
            .map(|e| (e.actor.as_str(), e.reason.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(
            cancelled,
            [("dashboard:maria", "duplicate signups from the CRM import")],
            "run {id}"
        );
    }
    assert_eq!(
        fleet.statuses(others.iter().map(|(id, _)| id)).await,
        others
    );

    browser.close().await.expect("end the session");
    drop(driver);
}

/// What a bulk action's page says once the job has ended (the page
/// reloads itself while it runs).
async fn bulk_done(browser: &Client) -> String {
    until(browser, "the bulk action's end", LOADS, async || {
        let url = browser.current_url().await.ok()?;
        if !url.path().starts_with("/bulk/") {
            return None;
        }
        browser
            .find(Locator::Css("p.notice.done"))
            .await
            .ok()?
            .text()
            .await
            .ok()
    })
    .await
}

/// The overview's count of ready `onboarding.welcome` runs, and whether
/// the page still carries the mark a script put in it (a reload drops it).
async fn welcome_ready(browser: &Client) -> Option<(String, bool)> {
    let script = "var row = Array.from(document.querySelectorAll('table.workflows-now tbody tr'))
            .find(function (tr) { return tr.cells[0].textContent === 'onboarding.welcome'; });
        if (!row || document.readyState !== 'complete') { return null; }
        return [row.cells[1].textContent, window.__pgbusMark === 1];";
    let found = browser.execute(script, Vec::new()).await.ok()?;
    serde_json::from_value(found).ok()
}

/// Sets the page's `document.visibilityState`, as a browser does when its
/// tab is hidden or shown, and says so to the page's listeners.
async fn show(browser: &Client, state: &str) {
    browser
        .execute(
            "Object.defineProperty(document, 'visibilityState', { value: arguments[0], configurable: true });
             document.dispatchEvent(new Event('visibilitychange'));",
            vec![serde_json::json!(state)],
        )
        .await
        .expect("visibility");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_reloads_itself_while_shown_and_never_while_hidden() {
    let fleet = Fleet::seed().await;
    let dashboard = Dashboard::start(&fleet.t.name, &[]);
    let base = dashboard.url.as_str();
    let driver = ChromeDriver::start();
    let browser = driver.session().await;
    let client = fleet.t.db.client();
    let start = async |customer: &str| {
        client
            .start::<Welcome>(&Signup::of(customer, "team"))
            .await
            .expect("start");
    };
    // Time for a few reloads, by the page's own period; a bound only.
    let patience = Duration::from_mins(1);
    let mark = "window.__pgbusMark = 1; return Number(document.body.getAttribute('data-refresh'));";

    browser.goto(&format!("{base}/")).await.expect("overview");
    until(&browser, "the overview", LOADS, async || {
        welcome_ready(&browser).await.filter(|(n, _)| n == "3")
    })
    .await;

    // Shown: a start shows up on its own, in a page loaded again.
    let period = browser.execute(mark, Vec::new()).await.expect("mark");
    let period = period.as_f64().expect("a period");
    assert!(period > 0.0, "the overview reloads: {period}");
    start("dunder").await;
    until(
        &browser,
        "a reload with the new run",
        patience,
        async || {
            welcome_ready(&browser)
                .await
                .filter(|(n, marked)| n == "4" && !marked)
        },
    )
    .await;

    // Hidden: no reload through three periods of the page's own clock,
    // though a run started meanwhile.
    browser.execute(mark, Vec::new()).await.expect("mark");
    show(&browser, "hidden").await;
    browser
        .execute("window.__pgbusHidden = performance.now();", Vec::new())
        .await
        .expect("the time");
    start("vandelay").await;
    let three = 3.0 * period * 1000.0;
    until(&browser, "three periods hidden", patience, async || {
        let (count, marked) = welcome_ready(&browser).await?;
        assert!(marked && count == "4", "reloaded while hidden: {count}");
        let hidden: f64 = browser
            .execute(
                "return performance.now() - window.__pgbusHidden;",
                Vec::new(),
            )
            .await
            .ok()?
            .as_f64()?;
        (hidden > three).then_some(())
    })
    .await;

    // Shown again: it reloads, with the run started while hidden.
    show(&browser, "visible").await;
    until(&browser, "a reload once shown", patience, async || {
        welcome_ready(&browser)
            .await
            .filter(|(n, marked)| n == "5" && !marked)
    })
    .await;

    // The runs list reloads too, its filters' selects left as the page drew
    // them (a select showing its first option is not a field being changed).
    browser.goto(&format!("{base}/runs")).await.expect("runs");
    let period = browser.execute(mark, Vec::new()).await.expect("mark");
    assert!(
        period.as_f64().is_some_and(|p| p > 0.0),
        "the list reloads: {period}"
    );
    until(&browser, "the runs list reloaded", patience, async || {
        let marked = browser
            .execute("return window.__pgbusMark === 1;", Vec::new())
            .await
            .ok()?;
        (marked == serde_json::json!(false)).then_some(())
    })
    .await;

    browser.close().await.expect("end the session");
    drop(driver);
}
