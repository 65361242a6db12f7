//! The pages the dashboard benchmark requests: the one list to add a page to.
//!
//! A page's path is fixed, or has `{id}` filled from a query over the loaded
//! data (`{schema}` in it is the bench schema), picking the run of the kind
//! the page is about; the workflow names are those of
//! `bench/sql/dashboard_data.sql`. A page whose route the dashboard does not
//! have yet answers 404 and is reported `absent`; one whose query finds no
//! run (a kind the data has none of at a small size) is reported `no run`.

/// One page to request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page {
    /// What the page is, as the table prints it.
    pub(crate) name: &'static str,
    /// Its path and query, with `{id}` where the picked id goes.
    pub(crate) path: &'static str,
    /// The query whose one value fills `{id}`, if the path has one.
    pub(crate) pick: Option<&'static str>,
}

impl Page {
    const fn fixed(name: &'static str, path: &'static str) -> Self {
        Self {
            name,
            path,
            pick: None,
        }
    }

    const fn picked(name: &'static str, path: &'static str, pick: &'static str) -> Self {
        Self {
            name,
            path,
            pick: Some(pick),
        }
    }
}

/// Every page measured, in the order they are requested in each round.
pub(crate) const PAGES: &[Page] = &[
    Page::fixed("overview", "/"),
    Page::fixed("queues", "/queues"),
    Page::fixed("limits", "/limits"),
    Page::fixed("runs, newest", "/runs"),
    Page::fixed("runs, status paused", "/runs?status=paused"),
    Page::fixed("runs, status ready", "/runs?status=ready"),
    Page::fixed("runs, status cancelled", "/runs?status=cancelled"),
    Page::fixed(
        "runs, workflow billing.charge",
        "/runs?workflow=billing.charge",
    ),
    Page::fixed(
        "runs, billing.charge + cancelled",
        "/runs?workflow=billing.charge&status=cancelled",
    ),
    Page::picked(
        "runs, search by idempotency key",
        "/runs?q=order-{id}",
        "SELECT max(id) FROM {schema}.runs WHERE idempotency_key IS NOT NULL AND idempotency_key LIKE 'order-%'",
    ),
    Page::fixed("runs, children too", "/runs?children=1"),
    Page::fixed(
        "runs, onboarding.verify + paused",
        "/runs?workflow=onboarding.verify&status=paused",
    ),
    Page::picked(
        "runs, 2% back (older pages)",
        "/runs?before={id}",
        "SELECT id FROM {schema}.runs ORDER BY id DESC OFFSET (SELECT count(*) / 50 FROM {schema}.runs) LIMIT 1",
    ),
    Page::picked(
        "runs, paused, before the oldest half",
        "/runs?status=paused&before={id}",
        "SELECT id FROM {schema}.runs ORDER BY id OFFSET (SELECT count(*) / 2 FROM {schema}.runs) LIMIT 1",
    ),
    Page::picked(
        "run, fan-out parent (largest batch)",
        "/runs/{id}",
        "SELECT run_id FROM {schema}.batches ORDER BY total DESC, id LIMIT 1",
    ),
    Page::picked(
        "run, fan-out parent (open batch)",
        "/runs/{id}",
        "SELECT run_id FROM {schema}.batches WHERE status = 'open' ORDER BY total DESC, id LIMIT 1",
    ),
    Page::picked(
        "run, fan-out child",
        "/runs/{id}",
        "SELECT max(id) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL",
    ),
    Page::picked(
        "run, long (most attempts)",
        "/runs/{id}",
        "SELECT max(id) FROM {schema}.runs WHERE workflow = 'sync.catalog'",
    ),
    Page::picked(
        "run, paused on a failed step",
        "/runs/{id}",
        "SELECT max(id) FROM {schema}.runs WHERE status = 'paused'",
    ),
    Page::picked(
        "run, waiting on a signal",
        "/runs/{id}",
        "SELECT min(run_id) FROM {schema}.steps WHERE status = 'waiting' AND waiting_for IS NOT NULL",
    ),
    Page::fixed("insights, window it picks", "/insights"),
    Page::fixed("insights, 1h", "/insights?window=1h"),
    Page::fixed("insights, 24h", "/insights?window=24h"),
    Page::fixed("insights, 7d", "/insights?window=7d"),
    Page::fixed("insights, 30d", "/insights?window=30d"),
    Page::fixed(
        "insights, 30d, `billing.` workflows",
        "/insights?window=30d&workflow=billing.",
    ),
    Page::fixed(
        "insights, 24h, `onboarding.verify`",
        "/insights?window=24h&workflow=onboarding.verify",
    ),
    Page::fixed("workers", "/workers"),
    Page::fixed("schedules", "/schedules"),
];
