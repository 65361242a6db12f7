//! The differential suite: the same scenarios through the memory store and the
//! Postgres store (a real worker on a pinned clock) must leave the same runs, step
//! histories and events, ids and actors aside. A change to one store that the
//! other lacks fails here.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    Action, Client, Clock, Error, ManualClock, RunFilter, RunStatus, RunView, StallAction,
    StepOutcome, StepStatus, SweepReport, Worker,
};
use pgbus_testkit::{TestDatabase, TestEnv, default_start};

// ---- the workflows the scenarios run -------------------------------------------

/// What the first step of `Verbs` does, chosen by the run's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Script {
    verb: String,
    cancel: bool,
    skip: bool,
}

fn script(verb: &str) -> Script {
    Script {
        verb: verb.to_owned(),
        cancel: false,
        skip: false,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("flaky: attempt {0}")]
struct Flaky(u32);

#[derive(Debug, thiserror::Error)]
#[error("fatal")]
struct Fatal;

#[derive(Debug, thiserror::Error)]
#[error("handled: {0}")]
struct Handled(&'static str);

struct Verbs;

#[workflow(name = "diff.verbs", input = Script, queue = "diff", cancel_if = cancelled)]
#[on_exception(matching(Fatal), action = "cancel")]
#[on_exception(matching(Handled), handler = triage)]
impl Verbs {
    fn triage(&self, _cx: &StepCx<Script>, error: &StepError) -> Option<Flow> {
        match error.downcast_ref::<Handled>() {
            Some(Handled("skip")) => Some(Flow::skip("triaged")),
            _ => None,
        }
    }

    fn cancelled(&self, cx: &StepCx<Script>) -> bool {
        cx.input().cancel
    }

    fn skipped(&self, cx: &StepCx<Script>) -> Result<bool, Fatal> {
        if cx.input().verb == "guard_error" {
            return Err(Fatal);
        }
        Ok(cx.input().skip)
    }

    #[step(on_exception(
        matching(Flaky),
        action = "reattempt",
        wait = "30s",
        max_reattempts = 2,
        terminal_action = "skip"
    ))]
    async fn act(&self, cx: &mut StepCx<Script>) -> StepResult {
        cx.output(&format!("{} #{}", cx.input().verb, cx.attempt()))?;
        match cx.input().verb.as_str() {
            "finish" => Ok(Flow::Finish),
            "pause" => Ok(Flow::pause("asked to")),
            "cancel" => Ok(Flow::cancel("asked to")),
            "skip" => Ok(Flow::skip("asked to")),
            "reattempt" if cx.attempt() == 1 => Ok(Flow::reattempt(Duration::from_secs(90))),
            "flaky_once" if cx.attempt() == 1 => Err(StepError::from(Flaky(cx.attempt()))),
            "flaky_always" => Err(StepError::from(Flaky(cx.attempt()))),
            "fatal" => Err(StepError::from(Fatal)),
            "other_error" => Err(StepError::msg("unexpected")),
            "handled_skip" => Err(StepError::from(Handled("skip"))),
            "handled_none" => Err(StepError::from(Handled("none"))),
            _ => Ok(Flow::Complete),
        }
    }

    #[step(wait = "5m", skip_if = skipped, priority = 4)]
    async fn follow(&self, cx: &mut StepCx<Script>) -> StepResult {
        let acted: Option<String> = cx.output_of("act")?;
        cx.output(&acted)?;
        Ok(Flow::Complete)
    }
}

/// A workflow before a deploy...
struct Before;

#[workflow(name = "diff.deploy", input = u8)]
impl Before {
    #[step]
    async fn a(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait = "1m")]
    async fn b(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn c(&self, _cx: &mut StepCx<u8>) {}
}

/// ...after a deploy that removed `b` properly, with a gravestone...
struct AfterRemoval;

#[workflow(name = "diff.deploy", input = u8)]
impl AfterRemoval {
    #[step]
    async fn a(&self, _cx: &mut StepCx<u8>) {}

    removed_step!(b);

    #[step]
    async fn c(&self, _cx: &mut StepCx<u8>) {}
}

/// ...and after one that dropped it without a trace.
struct AfterLoss;

#[workflow(name = "diff.deploy", input = u8)]
impl AfterLoss {
    #[step]
    async fn a(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn c(&self, _cx: &mut StepCx<u8>) {}
}

// ---- two drivers, one script ---------------------------------------------------

/// What a store must let a scenario do.
#[allow(clippy::large_enum_variant)] // two values per test; size does not matter
enum Driver {
    Memory(Arc<TestEnv>),
    Postgres {
        db: TestDatabase,
        clock: ManualClock,
        client: Client,
        worker: Worker,
    },
}

impl Driver {
    async fn postgres(
        register: impl FnOnce(pgbus_runtime::WorkerBuilder) -> pgbus_runtime::WorkerBuilder,
    ) -> Self {
        let clock = ManualClock::new(default_start());
        let db = TestDatabase::with_clock(Clock::Manual(clock.clone()))
            .await
            .expect("a test schema");
        let client = db.db().client();
        let worker = register(db.db().worker().notifications(false))
            .build()
            .expect("a worker");
        Self::Postgres {
            db,
            clock,
            client,
            worker,
        }
    }

    async fn start<W: Workflow>(&self, input: &W::Input) -> RunId {
        match self {
            Self::Memory(env) => env.start::<W>(input).expect("start").run_id,
            Self::Postgres { client, .. } => client.start::<W>(input).await.expect("start").run_id,
        }
    }

    async fn start_keyed<W: Workflow>(&self, input: &W::Input, key: &str) -> RunId {
        match self {
            Self::Memory(env) => env.start_idempotent::<W>(input, key).expect("start").run_id,
            Self::Postgres { client, .. } => {
                client
                    .start_idempotent::<W>(input, key)
                    .await
                    .expect("start")
                    .run_id
            }
        }
    }

    async fn run_until_idle(&self) {
        match self {
            Self::Memory(env) => {
                env.run_until_idle().await;
            }
            Self::Postgres { worker, .. } => {
                worker.run_until_idle().await.expect("run");
            }
        }
    }

    fn advance(&self, by: Duration) {
        match self {
            Self::Memory(env) => env.advance(by),
            Self::Postgres { clock, .. } => clock.advance(by),
        }
    }

    async fn view(&self, run: RunId) -> RunView {
        match self {
            Self::Memory(env) => env.run(run).expect("run"),
            Self::Postgres { client, .. } => client.run(run).await.expect("run"),
        }
    }

    async fn view_with(&self, run: RunId, read: pgbus_runtime::RunRead) -> RunView {
        match self {
            Self::Memory(env) => env.run_with(run, read).expect("run"),
            Self::Postgres { client, .. } => client.run_with(run, read).await.expect("run"),
        }
    }

    /// Whether the run still exists.
    async fn exists(&self, run: RunId) -> bool {
        let found = match self {
            Self::Memory(env) => env.run(run).map(drop),
            Self::Postgres { client, .. } => client.run(run).await.map(drop),
        };
        match found {
            Ok(()) => true,
            Err(Error::RunNotFound { .. }) => false,
            Err(other) => panic!("reading run {run}: {other}"),
        }
    }

    /// An operator action; the error, if refused, as text both stores must share.
    async fn act(&self, run: RunId, action: Action, reason: &str) -> Result<RunStatus, String> {
        let result = match (self, action) {
            (Self::Memory(env), Action::Pause) => env.pause(run, "ops", reason),
            (Self::Memory(env), Action::Resume) => env.resume(run, "ops", reason),
            (Self::Memory(env), Action::Cancel) => env.cancel(run, "ops", reason),
            (Self::Memory(env), Action::Skip) => env.skip(run, "ops", reason),
            (Self::Postgres { client, .. }, Action::Pause) => {
                client.pause(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Resume) => {
                client.resume(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Cancel) => {
                client.cancel(run, "ops", reason).await
            }
            (Self::Postgres { client, .. }, Action::Skip) => client.skip(run, "ops", reason).await,
        };
        result.map_err(|e| e.to_string())
    }

    /// Sends a signal; the error as text.
    async fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run: RunId,
        name: &str,
        payload: &T,
    ) -> Result<pgbus_runtime::SignalId, String> {
        let result = match self {
            Self::Memory(env) => env.signal(run, name, payload),
            Self::Postgres { client, .. } => client.signal(run, name, payload).await,
        };
        result.map_err(|e| e.to_string())
    }

    /// Sweeps once: (repaired, runs deleted).
    async fn sweep(&self) -> (usize, u64) {
        let report = match self {
            Self::Memory(env) => env.sweep(),
            Self::Postgres { worker, .. } => worker.sweep().await.expect("sweep"),
        };
        (report.repaired, report.runs_deleted)
    }

    /// Every run the store holds, by id.
    async fn all_views(&self) -> std::collections::BTreeMap<i64, RunView> {
        let filter = RunFilter::new().limit(1_000);
        let summaries = match self {
            Self::Memory(env) => env.list_runs(&filter).expect("list"),
            Self::Postgres { client, .. } => client.list_runs(&filter).await.expect("list"),
        };
        assert!(
            summaries.len() < 1_000,
            "a scenario keeps to a page of runs"
        );
        let mut views = std::collections::BTreeMap::new();
        for summary in summaries {
            views.insert(summary.id.0, self.view(summary.id).await);
        }
        views
    }

    /// The fan_out children of `run`: its batches in order, each batch's runs
    /// oldest first.
    async fn children(&self, run: RunId) -> Vec<RunId> {
        let views = self.all_views().await;
        let batches = &views.get(&run.0).expect("the parent exists").batches;
        batches
            .iter()
            .flat_map(|batch| {
                views
                    .values()
                    .filter(move |view| view.parent_batch_id == Some(batch.id))
                    .map(|view| view.run.id)
            })
            .collect()
    }

    /// Sweeps once: the whole report.
    async fn sweep_report(&self) -> SweepReport {
        match self {
            Self::Memory(env) => env.sweep(),
            Self::Postgres { worker, .. } => worker.sweep().await.expect("sweep"),
        }
    }

    /// Runs what is due now, one attempt: call it with a single row due, so
    /// that the worker's claim (up to its concurrency) and the environment's
    /// (the first due row) take the same one.
    async fn run_one(&self) {
        match self {
            Self::Memory(env) => {
                env.run_next().await.expect("a step was due");
            }
            Self::Postgres { worker, .. } => {
                assert_eq!(worker.run_once().await.expect("run"), 1, "one step due");
            }
        }
    }

    /// Claims the next due step for a worker that dies at once, before any
    /// body runs (as a claim the batch or the gate decides would). Memory:
    /// `TestEnv::crash_next`; Postgres: what claim.sql writes, under a worker
    /// that never registered and so never heartbeats. Returns the run.
    async fn claim_and_die(&self) -> RunId {
        match self {
            Self::Memory(env) => env.crash_next().expect("a step was due"),
            Self::Postgres { db, clock, .. } => {
                let schema = format!("\"{}\"", db.db().schema().as_str());
                let sql = CLAIM_AND_DIE.replace("{schema}", &schema);
                let client = db.db().pool().get().await.expect("a connection");
                let now = clock.now();
                let row = client
                    .query_one(&sql, &[&now])
                    .await
                    .expect("a step was due");
                assert_eq!(
                    (row.get::<_, i64>(1), row.get::<_, i64>(2)),
                    (1, 1),
                    "the run moved, the event written"
                );
                RunId(row.get(0))
            }
        }
    }

    /// Runs the next due attempt in the background.
    fn spawn_next(&self) -> tokio::task::JoinHandle<()> {
        match self {
            Self::Memory(env) => {
                let env = Arc::clone(env);
                tokio::spawn(async move {
                    env.run_next().await;
                })
            }
            Self::Postgres { worker, .. } => {
                let worker = worker.clone();
                tokio::spawn(async move {
                    worker.run_once().await.expect("run");
                })
            }
        }
    }

    /// Claims the next due step for a worker that dies at once. Postgres: the
    /// worker claims and its body (which signals `entered` and then hangs on a
    /// first attempt) is dropped mid-flight, as a SIGKILL would; the worker never
    /// heartbeats after its claim, like a dead one.
    async fn crash_next(&self, entered: &tokio::sync::Notify) {
        match self {
            Self::Memory(env) => {
                env.crash_next().expect("a step was due");
            }
            Self::Postgres { .. } => {
                let running = self.spawn_next();
                entered.notified().await;
                running.abort();
                assert!(running.await.is_err_and(|e| e.is_cancelled()));
            }
        }
    }
}

/// claim.sql for a worker named `crashed` that dies right after its claim: the
/// first due row of a ready run (by priority, due time, id) in progress, its
/// run performing, a `step_started` event. $1 now.
const CLAIM_AND_DIE: &str = "
WITH due AS (
    SELECT s.id
    FROM {schema}.steps s
    JOIN {schema}.runs r ON r.id = s.run_id
    WHERE s.status IN ('scheduled', 'waiting') AND s.scheduled_at <= $1
      AND r.status = 'ready'
    ORDER BY s.priority, s.scheduled_at, s.id
    LIMIT 1
), claimed AS (
    UPDATE {schema}.steps s
    SET status = 'in_progress', started_at = $1, worker_id = 'crashed',
        stall_at = $1 + coalesce(s.timeout_ms, 300000) * interval '1 millisecond'
    FROM due
    WHERE s.id = due.id
    RETURNING s.id, s.run_id, s.step_name, s.attempt
), moved AS (
    UPDATE {schema}.runs r SET status = 'performing', updated_at = $1
    FROM claimed c
    WHERE r.id = c.run_id
    RETURNING r.id
), started AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
    SELECT run_id, id, step_name, attempt, 'step_started', 'crashed', $1 FROM claimed
    RETURNING id
)
SELECT c.run_id, (SELECT count(*) FROM moved), (SELECT count(*) FROM started)
FROM claimed c";

/// A run as both stores must agree on it: everything but ids and actors, times as
/// offsets from the start of the run the scenario returned (its root). Ids a
/// store hands out appear as labels: a run as `r0` (the scenario's first run),
/// `r0/b1/c2` (the third child of its second batch), a batch as `r0/b1`, a
/// signal as its position among the run's signals, a step row as its position
/// among the run's rows. A run's fan_out children are projected with it, in
/// their batch.
#[derive(Debug, PartialEq)]
struct Projection {
    label: String,
    workflow: String,
    status: RunStatus,
    current_step: Option<String>,
    error: (Option<String>, Option<String>),
    digest: String,
    input: serde_json::Value,
    /// Created, last changed, paused, cancelled, finished.
    times_ms: (i64, i64, Option<i64>, Option<i64>, Option<i64>),
    /// The batch a fan_out child counts toward, as a label.
    parent_batch: Option<String>,
    steps: Vec<StepLine>,
    events: Vec<EventLine>,
    signals: Vec<SignalLine>,
    batches: Vec<BatchLine>,
}

/// Event name, step name, attempt, reason, details (ids as labels).
type EventLine = (
    String,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<serde_json::Value>,
);

#[derive(Debug, PartialEq)]
struct StepLine {
    name: String,
    attempt: i32,
    status: StepStatus,
    outcome: Option<StepOutcome>,
    queue: String,
    priority: i16,
    /// Due, claimed, ended, stall horizon.
    times_ms: (i64, Option<i64>, Option<i64>, Option<i64>),
    output: Option<serde_json::Value>,
    error: (Option<String>, Option<String>, Vec<String>),
    waiting_for: Option<String>,
    waiting_since_ms: Option<i64>,
}

#[derive(Debug, PartialEq)]
struct SignalLine {
    name: String,
    payload: serde_json::Value,
    created_ms: i64,
    /// The consuming attempt's position among the run's step rows.
    consumed_by: Option<usize>,
    consumed_ms: Option<i64>,
}

#[derive(Debug, PartialEq)]
struct BatchLine {
    /// The attempt that started it, as a position among the run's step rows.
    parent_step: Option<usize>,
    total: i32,
    finished: i32,
    cancelled: i32,
    status: String,
    created_ms: i64,
    resolved_ms: Option<i64>,
    /// Its child runs, oldest first.
    children: Vec<Projection>,
}

/// Every run of a store by id, and the labels of the runs and batches that the
/// scenario's runs reach.
#[derive(Default)]
struct Ids {
    views: std::collections::BTreeMap<i64, RunView>,
    runs: std::collections::HashMap<i64, String>,
    batches: std::collections::HashMap<i64, String>,
}

impl Ids {
    /// Labels `run` and, through its batches, its children and theirs.
    fn label(&mut self, run: i64, label: &str) {
        if self.runs.contains_key(&run) {
            return;
        }
        self.runs.insert(run, label.to_owned());
        let batches: Vec<i64> = self
            .views
            .get(&run)
            .map(|view| view.batches.iter().map(|b| b.id).collect())
            .unwrap_or_default();
        for (k, batch) in batches.into_iter().enumerate() {
            let batch_label = format!("{label}/b{k}");
            self.batches.insert(batch, batch_label.clone());
            for (j, child) in self.children_of_batch(batch).into_iter().enumerate() {
                self.label(child, &format!("{batch_label}/c{j}"));
            }
        }
    }

    /// The runs of a batch, oldest first.
    fn children_of_batch(&self, batch: i64) -> Vec<i64> {
        self.views
            .iter()
            .filter(|(_, view)| view.parent_batch_id == Some(batch))
            .map(|(id, _)| *id)
            .collect()
    }
}

/// A single run, its children left out.
fn project(view: &RunView) -> Projection {
    project_in(view, "r0", &Ids::default(), view.run.created_at)
}

/// How one run's view names the ids it holds: by the labels of [`Ids`], else by
/// position in the run itself.
struct Names<'a> {
    view: &'a RunView,
    label: &'a str,
    ids: &'a Ids,
}

impl Names<'_> {
    fn batch(&self, raw: i64) -> Option<String> {
        self.ids.batches.get(&raw).cloned().or_else(|| {
            self.view
                .batches
                .iter()
                .position(|b| b.id == raw)
                .map(|k| format!("{}/b{k}", self.label))
        })
    }

    fn run(&self, raw: i64) -> Option<String> {
        self.ids
            .runs
            .get(&raw)
            .cloned()
            .or_else(|| (raw == self.view.run.id.0).then(|| self.label.to_owned()))
    }

    fn step(&self, raw: i64) -> Option<usize> {
        self.view.steps.iter().position(|s| s.id == raw)
    }

    /// Event details with the ids they name as labels.
    fn details(&self, details: Option<&serde_json::Value>) -> Option<serde_json::Value> {
        let mut details = details?.clone();
        if let serde_json::Value::Object(map) = &mut details {
            for (key, value) in map.iter_mut() {
                let Some(raw) = value.as_i64() else {
                    continue;
                };
                let named = match key.as_str() {
                    "signal_id" => self
                        .view
                        .signals
                        .iter()
                        .position(|s| s.id.0 == raw)
                        .map(|i| format!("signal {i}")),
                    "batch_id" => self.batch(raw),
                    "parent_run_id" | "cancelled_with" => self.run(raw),
                    _ => continue,
                };
                *value = serde_json::Value::String(
                    named.unwrap_or_else(|| format!("unknown {key} {raw}")),
                );
            }
        }
        Some(details)
    }

    /// An event's reason; a cascaded cancel names the cancelled run in it.
    fn reason(&self, reason: Option<&str>) -> Option<String> {
        let text = reason?;
        let named = text
            .strip_prefix("parent run ")
            .and_then(|rest| rest.strip_suffix(" was cancelled"))
            .and_then(|raw| raw.parse().ok())
            .map(|raw| {
                let run = self
                    .run(raw)
                    .unwrap_or_else(|| format!("unknown run {raw}"));
                format!("parent run {run} was cancelled")
            });
        Some(named.unwrap_or_else(|| text.to_owned()))
    }
}

fn step_line(
    s: &pgbus_runtime::StepView,
    offset: impl Fn(chrono::DateTime<chrono::Utc>) -> i64,
) -> StepLine {
    StepLine {
        name: s.step_name.clone(),
        attempt: s.attempt,
        status: s.status,
        outcome: s.outcome,
        queue: s.queue.clone(),
        priority: s.priority,
        times_ms: (
            offset(s.scheduled_at),
            s.started_at.map(&offset),
            s.finished_at.map(&offset),
            s.stall_at.map(&offset),
        ),
        output: s.output.clone(),
        error: (
            s.error_class.clone(),
            s.error_message.clone(),
            s.error_causes.clone(),
        ),
        waiting_for: s.waiting_for.clone(),
        waiting_since_ms: s.waiting_since.map(&offset),
    }
}

fn project_in(
    view: &RunView,
    label: &str,
    ids: &Ids,
    origin: chrono::DateTime<chrono::Utc>,
) -> Projection {
    let offset = |t: chrono::DateTime<chrono::Utc>| (t - origin).num_milliseconds();
    let names = Names { view, label, ids };
    Projection {
        label: label.to_owned(),
        workflow: view.run.workflow.clone(),
        status: view.run.status,
        current_step: view.run.current_step.clone(),
        error: (view.error_class.clone(), view.error_message.clone()),
        digest: view.definition_digest.clone(),
        input: view.input.clone(),
        times_ms: (
            offset(view.run.created_at),
            offset(view.run.updated_at),
            view.paused_at.map(offset),
            view.cancelled_at.map(offset),
            view.run.finished_at.map(offset),
        ),
        parent_batch: view
            .parent_batch_id
            .map(|raw| names.batch(raw).unwrap_or_else(|| "a batch".to_owned())),
        steps: view.steps.iter().map(|s| step_line(s, offset)).collect(),
        events: view
            .events
            .iter()
            .map(|e| {
                (
                    e.event.clone(),
                    e.step_name.clone(),
                    e.attempt,
                    names.reason(e.reason.as_deref()),
                    names.details(e.details.as_ref()),
                )
            })
            .collect(),
        signals: view
            .signals
            .iter()
            .map(|g| SignalLine {
                name: g.name.clone(),
                payload: g.payload.clone(),
                created_ms: offset(g.created_at),
                consumed_by: g.consumed_by.map(|id| names.step(id).unwrap_or(usize::MAX)),
                consumed_ms: g.consumed_at.map(offset),
            })
            .collect(),
        batches: view
            .batches
            .iter()
            .enumerate()
            .map(|(k, b)| BatchLine {
                parent_step: names.step(b.parent_step_id),
                total: b.total,
                finished: b.finished,
                cancelled: b.cancelled,
                status: b.status.clone(),
                created_ms: offset(b.created_at),
                resolved_ms: b.resolved_at.map(offset),
                children: ids
                    .children_of_batch(b.id)
                    .iter()
                    .enumerate()
                    .filter_map(|(j, child)| {
                        let child_label = format!("{label}/b{k}/c{j}");
                        ids.views
                            .get(child)
                            .map(|child| project_in(child, &child_label, ids, origin))
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Projects `roots` (and their children) of one store.
async fn project_all(driver: &Driver, roots: &[RunId]) -> (Vec<Projection>, usize) {
    let mut ids = Ids {
        views: driver.all_views().await,
        ..Ids::default()
    };
    let total = ids.views.len();
    for (i, root) in roots.iter().enumerate() {
        ids.label(root.0, &format!("r{i}"));
    }
    let projections = roots
        .iter()
        .map(|root| {
            let view = ids.views.get(&root.0).expect("a returned run exists");
            let label = ids.runs.get(&root.0).expect("labelled");
            project_in(view, label, &ids, view.run.created_at)
        })
        .collect();
    (projections, total)
}

/// Runs `scenario` on both stores and compares every run it returns, with its
/// fan_out children, and how many runs each store holds.
async fn both<F, Fut>(
    register_memory: impl Fn(TestEnv) -> TestEnv,
    register_pg: impl FnOnce(pgbus_runtime::WorkerBuilder) -> pgbus_runtime::WorkerBuilder,
    scenario: F,
) -> Vec<Projection>
where
    F: Fn(Driver) -> Fut,
    Fut: std::future::Future<Output = (Driver, Vec<RunId>)>,
{
    let (memory, memory_runs) =
        scenario(Driver::Memory(Arc::new(register_memory(TestEnv::new())))).await;
    let (postgres, pg_runs) = scenario(Driver::postgres(register_pg).await).await;
    assert_eq!(memory_runs.len(), pg_runs.len());
    let (left, left_total) = project_all(&memory, &memory_runs).await;
    let (right, right_total) = project_all(&postgres, &pg_runs).await;
    for (left, right) in left.iter().zip(&right) {
        assert_eq!(
            left, right,
            "memory (left) and Postgres (right) disagree on a run"
        );
    }
    assert_eq!(
        left_total, right_total,
        "memory (left) and Postgres (right) hold different numbers of runs"
    );
    // `DIFF_DUMP=1 cargo test ... -- --nocapture` shows what was compared.
    if std::env::var_os("DIFF_DUMP").is_some() {
        eprintln!("{left:#?}\n=== postgres\n{right:#?}");
    }
    left
}

/// Start, then alternate running and moving time until nothing is left.
async fn drive(driver: &Driver) {
    for minutes in [0, 1, 1, 2, 5, 10] {
        driver.advance(Duration::from_secs(60 * minutes));
        driver.run_until_idle().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_policy_and_guard_leaves_the_same_history() {
    let inputs = [
        script("complete"),
        script("finish"),
        script("pause"),
        script("cancel"),
        script("skip"),
        script("reattempt"),
        script("flaky_once"),
        script("flaky_always"),
        script("fatal"),
        script("other_error"),
        script("guard_error"),
        Script {
            cancel: true,
            ..script("complete")
        },
        Script {
            skip: true,
            ..script("complete")
        },
    ];
    let projections = both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| {
            let inputs = inputs.clone();
            async move {
                let mut runs = Vec::new();
                for input in &inputs {
                    runs.push(driver.start::<Verbs>(input).await);
                }
                drive(&driver).await;
                (driver, runs)
            }
        },
    )
    .await;

    // The histories are not only equal but right: spot-check the table.
    let status = |i: usize| projections[i].status;
    assert_eq!(status(0), RunStatus::Finished);
    assert_eq!(status(1), RunStatus::Finished);
    assert_eq!(status(2), RunStatus::Paused);
    assert_eq!(status(3), RunStatus::Cancelled);
    assert_eq!(status(4), RunStatus::Finished);
    assert_eq!(projections[5].steps[1].attempt, 2, "reattempted once");
    assert_eq!(
        projections[7]
            .steps
            .iter()
            .filter(|s| s.name == "act")
            .count(),
        3,
        "max_reattempts = 2"
    );
    assert_eq!(
        projections[7].steps[2].outcome,
        Some(StepOutcome::Skipped),
        "terminal_action = skip"
    );
    assert_eq!(
        status(8),
        RunStatus::Cancelled,
        "workflow policy naming Fatal"
    );
    assert_eq!(status(9), RunStatus::Paused, "no policy: pause");
    assert_eq!(
        status(10),
        RunStatus::Cancelled,
        "a guard's Fatal goes to the policies"
    );
    assert_eq!(status(11), RunStatus::Cancelled, "cancel_if");
    assert_eq!(
        projections[12].steps[1].status,
        StepStatus::Skipped,
        "skip_if"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gravestone_is_skipped_and_a_lost_step_pauses_the_same_way() {
    for lost in [false, true] {
        let projections = both(
            |env| env.register(Before),
            |worker| worker.register(Before),
            |driver| async move {
                let run = driver.start::<Before>(&1).await;
                driver.run_until_idle().await; // `a`; `b` is parked a minute out
                let driver = match driver {
                    Driver::Memory(env) => {
                        let env = Arc::try_unwrap(env).expect("the only handle");
                        Driver::Memory(Arc::new(if lost {
                            env.register(AfterLoss)
                        } else {
                            env.register(AfterRemoval)
                        }))
                    }
                    Driver::Postgres {
                        db, clock, client, ..
                    } => {
                        let builder = db.db().worker().notifications(false);
                        let worker = if lost {
                            builder.register(AfterLoss)
                        } else {
                            builder.register(AfterRemoval)
                        };
                        Driver::Postgres {
                            worker: worker.build().expect("worker"),
                            db,
                            clock,
                            client,
                        }
                    }
                };
                drive(&driver).await;
                (driver, vec![run])
            },
        )
        .await;
        let expected = if lost {
            RunStatus::Paused
        } else {
            RunStatus::Finished
        };
        assert_eq!(projections[0].status, expected, "lost = {lost}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_starts_agree() {
    both(
        |env| env.register(Before),
        |worker| worker.register(Before),
        |driver| async move {
            let first = driver.start_keyed::<Before>(&1, "same").await;
            let second = driver.start_keyed::<Before>(&2, "same").await;
            assert_eq!(first, second);
            drive(&driver).await;
            (driver, vec![first])
        },
    )
    .await;
}

/// Lets a test hold a body open and act while it runs.
#[derive(Default)]
struct Gate {
    entered: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

struct Gated {
    gate: std::sync::Arc<Gate>,
}

#[workflow(name = "diff.gated", input = u8)]
impl Gated {
    #[step]
    async fn hold(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&"held")?;
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_lost_its_claim_is_ignored_the_same_way() {
    use std::sync::Arc;

    // Memory: the claim is taken away while the body runs.
    let gate = Arc::new(Gate::default());
    let env = Arc::new(TestEnv::new().register(Gated {
        gate: Arc::clone(&gate),
    }));
    let memory_run = env.start::<Gated>(&1).expect("start").run_id;
    let running = tokio::spawn({
        let env = Arc::clone(&env);
        async move { env.run_next().await }
    });
    gate.entered.notified().await;
    assert!(env.lose_claim(memory_run));
    gate.release.notify_one();
    let record = running.await.expect("join").expect("an attempt ran");
    assert!(record.late);
    assert!(
        env.run_until_idle().await.is_empty(),
        "nothing follows a lost claim"
    );

    // Postgres: the same, the row re-pointed in SQL.
    let clock = ManualClock::new(default_start());
    let db = TestDatabase::with_clock(Clock::Manual(clock))
        .await
        .expect("schema");
    let gate = Arc::new(Gate::default());
    let worker = db
        .db()
        .worker()
        .notifications(false)
        .register(Gated {
            gate: Arc::clone(&gate),
        })
        .build()
        .expect("worker");
    let client = db.db().client();
    let pg_run = client.start::<Gated>(&1).await.expect("start").run_id;
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run_once().await }
    });
    gate.entered.notified().await;
    let sql = format!(
        "UPDATE \"{}\".steps SET worker_id = 'elsewhere' WHERE run_id = $1 AND status = 'in_progress'",
        db.db().schema()
    );
    let moved = db
        .db()
        .pool()
        .get()
        .await
        .expect("connection")
        .execute(&sql, &[&pg_run.0])
        .await
        .expect("re-point the claim");
    assert_eq!(moved, 1);
    gate.release.notify_one();
    assert_eq!(running.await.expect("join").expect("run"), 1);
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);

    let memory = project(&env.run(memory_run).expect("run"));
    let postgres = project(&client.run(pg_run).await.expect("run"));
    assert_eq!(
        memory, postgres,
        "memory (left) and Postgres (right) disagree"
    );
    assert_eq!(
        memory.status,
        RunStatus::Performing,
        "the lost attempt changed nothing"
    );
    assert_eq!(
        memory.events.last().map(|e| e.0.as_str()),
        Some("late_completion_ignored")
    );
    assert_eq!(memory.steps[0].output, None, "the late output is discarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_worker_never_skips_a_step_the_run_has() {
    // The run starts under `Before` (a, b, c); the only worker runs an older
    // version without `b`. The run follows its own step list: `b` is scheduled and
    // pauses the run with StepNotDefined instead of being skipped.
    let projections = both(
        |env| env.register(AfterLoss),
        |worker| worker.register(AfterLoss),
        |driver| async move {
            let run = driver.start::<Before>(&1).await;
            drive(&driver).await;
            (driver, vec![run])
        },
    )
    .await;
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Paused);
    let names: Vec<&str> = run.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "b was not skipped");
    assert!(
        run.error
            .0
            .as_deref()
            .unwrap_or_default()
            .ends_with("StepNotDefined")
    );
}

// ---- operator actions, stalls and retention -------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_leave_the_same_history_and_refusals() {
    let projections = both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| async move {
            let asked = driver.start::<Verbs>(&script("pause")).await;
            let failed = driver.start::<Verbs>(&script("other_error")).await;
            let early = driver.start::<Verbs>(&script("complete")).await;
            let held = driver.start::<Verbs>(&script("complete")).await;
            let dropped = driver.start::<Verbs>(&script("complete")).await;
            assert_eq!(
                driver.act(early, Action::Pause, "before it starts").await,
                Ok(RunStatus::Paused)
            );
            driver.run_until_idle().await;

            // A `Pause` verb: nothing to skip; resume schedules `follow` 5 min on.
            let refused = driver.act(asked, Action::Skip, "r").await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("nothing to skip")),
                "{refused:?}"
            );
            assert_eq!(
                driver.act(asked, Action::Resume, "go on").await,
                Ok(RunStatus::Ready)
            );
            // An error pause: resume runs a new attempt (which fails again), then
            // skip passes over it.
            driver.advance(Duration::from_secs(7));
            assert_eq!(
                driver.act(failed, Action::Resume, "retry").await,
                Ok(RunStatus::Ready)
            );
            driver.run_until_idle().await;
            assert_eq!(
                driver.act(failed, Action::Skip, "give up").await,
                Ok(RunStatus::Ready)
            );
            // Paused before its first step: resume lets it start.
            assert_eq!(
                driver.act(early, Action::Resume, "r").await,
                Ok(RunStatus::Ready)
            );
            // A held row: skipped; cancel a scheduled one.
            assert_eq!(
                driver.act(held, Action::Pause, "r").await,
                Ok(RunStatus::Paused)
            );
            assert_eq!(
                driver.act(held, Action::Skip, "not this one").await,
                Ok(RunStatus::Finished)
            );
            assert_eq!(
                driver.act(dropped, Action::Cancel, "bye").await,
                Ok(RunStatus::Cancelled)
            );
            let refused = driver.act(dropped, Action::Resume, "r").await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("has ended (cancelled)")),
                "{refused:?}"
            );
            let refused = driver.act(early, Action::Resume, "r").await;
            assert!(
                refused.as_ref().is_err_and(|e| e.contains("not paused")),
                "{refused:?}"
            );
            drive(&driver).await;
            (driver, vec![asked, failed, early, held, dropped])
        },
    )
    .await;
    let status: Vec<RunStatus> = projections.iter().map(|p| p.status).collect();
    assert_eq!(
        status,
        [
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Cancelled
        ]
    );
}

/// `work` hangs on its first attempt (after saying so), for a worker to die in.
struct Fragile {
    entered: Arc<tokio::sync::Notify>,
}

#[workflow(name = "diff.fragile", input = u8)]
impl Fragile {
    #[step(timeout = "1m")]
    async fn work(&self, cx: &mut StepCx<u8>) {
        if cx.attempt() == 1 {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_is_swept_the_same_way() {
    // Lost worker (30 s of silence), reattempted; and past the step's timeout
    // (the lost-worker threshold set beyond it), paused, then resumed.
    for (action, silence, lost_after, expected) in [
        (
            StallAction::Reattempt {
                wait: Duration::from_secs(10),
            },
            Duration::from_secs(31),
            Duration::from_secs(30),
            ("worker_lost", RunStatus::Finished),
        ),
        (
            StallAction::Pause,
            Duration::from_secs(61),
            Duration::from_mins(10),
            ("timeout", RunStatus::Paused),
        ),
    ] {
        let entered = Arc::new(tokio::sync::Notify::new());
        let projections = both(
            |env| {
                env.stall_action(action)
                    .lost_worker_threshold(lost_after)
                    .register(Fragile {
                        entered: Arc::clone(&entered),
                    })
            },
            |worker| {
                worker
                    .stall_action(action)
                    .lost_worker_threshold(lost_after)
                    .register(Fragile {
                        entered: Arc::clone(&entered),
                    })
            },
            |driver| {
                let entered = Arc::clone(&entered);
                async move {
                    let run = driver.start::<Fragile>(&1).await;
                    driver.crash_next(&entered).await;
                    driver.advance(silence.saturating_sub(Duration::from_secs(2)));
                    assert_eq!(driver.sweep().await, (0, 0), "not yet");
                    driver.advance(Duration::from_secs(2));
                    assert_eq!(driver.sweep().await, (1, 0));
                    assert_eq!(driver.sweep().await, (0, 0), "repaired once");
                    drive(&driver).await;
                    (driver, vec![run])
                }
            },
        )
        .await;
        let run = &projections[0];
        assert_eq!(run.status, expected.1);
        let stall = run
            .events
            .iter()
            .find(|e| e.0 == "stall_detected")
            .expect("stall_detected");
        assert_eq!(stall.3.as_deref(), Some(expected.0));
        assert!(
            run.steps[0]
                .error
                .0
                .as_deref()
                .unwrap_or_default()
                .ends_with("StepStalled")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_same_runs() {
    both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| async move {
            let finished = driver.start::<Verbs>(&script("finish")).await;
            let paused = driver.start::<Verbs>(&script("pause")).await;
            driver.run_until_idle().await;
            driver.advance(pgbus_runtime::worker::DEFAULT_RETENTION);
            assert_eq!(driver.sweep().await, (0, 0), "exactly the retention: kept");
            driver.advance(Duration::from_secs(1));
            let later = driver.start::<Verbs>(&script("finish")).await;
            driver.run_until_idle().await;
            assert_eq!(driver.sweep().await, (0, 1));
            assert!(!driver.exists(finished).await);
            assert!(driver.exists(paused).await, "only ended runs go");
            assert!(driver.exists(later).await, "a recent run stays");
            (driver, vec![paused, later])
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_cancel_during_a_step_race_the_same_way() {
    for action in [Action::Pause, Action::Cancel] {
        let gate = Arc::new(Gate::default());
        let projections = both(
            |env| {
                env.register(Gated {
                    gate: Arc::clone(&gate),
                })
            },
            |worker| {
                worker.register(Gated {
                    gate: Arc::clone(&gate),
                })
            },
            |driver| {
                let gate = Arc::clone(&gate);
                async move {
                    let run = driver.start::<Gated>(&1).await;
                    let running = driver.spawn_next();
                    gate.entered.notified().await;
                    driver.act(run, action, "mid-step").await.expect("legal");
                    gate.release.notify_one();
                    running.await.expect("join");
                    driver.run_until_idle().await;
                    (driver, vec![run])
                }
            },
        )
        .await;
        let run = &projections[0];
        let names: Vec<&str> = run.events.iter().map(|e| e.0.as_str()).collect();
        match action {
            Action::Pause => {
                assert_eq!(run.status, RunStatus::Paused, "held");
                assert_eq!(run.steps[1].status, StepStatus::Scheduled, "next row held");
            }
            _ => {
                assert_eq!(run.status, RunStatus::Cancelled);
                assert_eq!(run.steps.len(), 1, "no further step");
                assert_eq!(names.last(), Some(&"late_completion_ignored"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_are_stored_or_refused_the_same_way() {
    both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| async move {
            let open = driver.start::<Verbs>(&script("pause")).await;
            let done = driver.start::<Verbs>(&script("finish")).await;
            driver.run_until_idle().await;
            let sent = driver
                .signal(open, "payment.settled", &serde_json::json!({"amount": 12}))
                .await;
            assert_eq!(
                sent,
                Ok(pgbus_runtime::SignalId(1)),
                "a paused run keeps it"
            );
            let refused = driver.signal(done, "payment.settled", &1).await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("has ended (finished)")),
                "{refused:?}"
            );
            let missing = driver.signal(RunId(999_999), "x", &1).await;
            assert!(missing.is_err_and(|e| e.contains("does not exist")));
            for (name, payload) in [
                ("", serde_json::json!(1)),
                (" padded", serde_json::json!(1)),
                ("ok", serde_json::json!({"a": "nul\u{0}"})),
            ] {
                let bad = driver.signal(open, name, &payload).await;
                assert!(
                    bad.is_err_and(|e| e.starts_with("invalid signal")),
                    "{name:?}"
                );
            }
            (driver, vec![open, done])
        },
    )
    .await;
}

/// A bounded read of a long run, as both stores return it: what is kept,
/// the counts, and which values are left out for their length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_read_keeps_the_same_latest_parts() {
    async fn scenario(driver: &Driver) -> Vec<String> {
        let run = driver.start::<Verbs>(&script("other_error")).await;
        drive(driver).await;
        for round in 0..6 {
            let payload = serde_json::json!({"round": round, "note": "x".repeat(round * 10)});
            driver.signal(run, "poke", &payload).await.expect("signal");
            driver
                .act(run, Action::Resume, "again")
                .await
                .expect("resume");
            drive(driver).await;
        }
        let read = pgbus_runtime::RunRead::latest(3).value_bytes(40);
        let view = driver.view_with(run, read).await;
        let whole = driver
            .view_with(run, pgbus_runtime::RunRead::latest(10_000))
            .await;
        assert!(whole.omitted.is_empty(), "no value bound, nothing left out");
        assert_eq!(whole.steps.len(), 7, "one attempt per resume and the first");
        let mut summary = vec![format!("{:?}", view.counts)];
        summary.extend(
            view.steps
                .iter()
                .map(|s| format!("step {} #{}", s.step_name, s.attempt)),
        );
        summary.extend(
            view.events
                .iter()
                .map(|e| format!("event {} {:?}", e.event, e.attempt)),
        );
        summary.extend(
            view.signals
                .iter()
                .map(|s| format!("signal {} {}", s.id, s.payload)),
        );
        summary.extend(view.omitted.iter().map(|o| match o.value {
            pgbus_runtime::ValueOf::Output { .. } => format!("omitted output {}", o.bytes),
            other => format!("omitted {other:?} {}", o.bytes),
        }));
        assert_eq!(view.steps.len(), 3);
        assert_eq!(view.signals.len(), 3);
        assert!(view.counts.events > 3 && view.counts.signals == 6);
        assert!(
            view.events.iter().any(|e| e.event == "paused")
                && view
                    .events
                    .iter()
                    .filter(|e| e.event == "step_started")
                    .count()
                    == 3,
            "the older events the kept attempts' timeline needs are read too: {summary:#?}"
        );
        summary
    }
    let memory = Driver::Memory(Arc::new(TestEnv::new().register(Verbs)));
    let postgres = Driver::postgres(|worker| worker.register(Verbs)).await;
    let left = scenario(&memory).await;
    let right = scenario(&postgres).await;
    assert!(
        left.iter().any(|line| line.starts_with("omitted Input"))
            && left.iter().any(|line| line.starts_with("omitted Payload")),
        "the input and the longer payloads pass 40 bytes: {left:#?}"
    );
    assert_eq!(
        left, right,
        "memory (left) and Postgres (right) read differently"
    );
}

// ---- wait_for: signals, predicates, timeouts --------------------------------------

/// Holds the `matches` predicate open once, after it is armed, so that a test can
/// send a signal between a claim and its park.
#[derive(Default)]
struct Hold {
    armed: std::sync::atomic::AtomicBool,
    entered: tokio::sync::Notify,
    released: std::sync::Mutex<bool>,
    release: std::sync::Condvar,
}

impl Hold {
    fn arm(&self) {
        *self.released.lock().unwrap() = false;
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// In the predicate: blocks until released, if armed.
    fn stop_here(&self) {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            let mut released = self.released.lock().unwrap();
            while !*released {
                released = self.release.wait(released).unwrap();
            }
        }
    }

    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.release.notify_all();
    }
}

/// `prepare`, then `approve` waits for an `approval` its predicate accepts (not
/// `{"ok": false}`); a `{"flaky": true}` approval fails the first attempt, which is
/// reattempted 30 s later and sees the same signal.
struct Approvals {
    hold: Arc<Hold>,
}

#[workflow(name = "diff.approvals", input = u8, queue = "diff")]
impl Approvals {
    fn accepts(&self, _cx: &StepCx<u8>, signal: &Signal) -> bool {
        self.hold.stop_here();
        signal.payload["ok"] != false
    }

    #[step]
    async fn prepare(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&"prepared")?;
        Ok(Flow::Complete)
    }

    #[step(
        wait_for(name = "approval", matches = accepts),
        on_exception(matching(Flaky), action = "reattempt", wait = "30s", max_reattempts = 2)
    )]
    async fn approve(&self, cx: &mut StepCx<u8>) -> StepResult {
        let payload = cx.signal().map(|s| s.payload.clone());
        cx.output(&serde_json::json!({ "payload": payload, "attempt": cx.attempt() }))?;
        if payload.as_ref().is_some_and(|p| p["flaky"] == true) && cx.attempt() == 1 {
            return Err(StepError::from(Flaky(cx.attempt())));
        }
        Ok(Flow::Complete)
    }

    #[step(wait = "1m")]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

fn approvals() -> Approvals {
    Approvals {
        hold: Arc::new(Hold::default()),
    }
}

/// A `wait_for = "go"` step with a 10-minute `wait_timeout` and the given
/// `on_timeout`, then `after`.
macro_rules! timeout_workflow {
    ($ty:ident, $name:literal, $on_timeout:literal) => {
        struct $ty;

        #[workflow(name = $name, input = u8, queue = "diff")]
        impl $ty {
            #[step(wait_for = "go", wait_timeout = "10m", on_timeout = $on_timeout)]
            async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
                let payload = cx.signal().map(|s| s.payload.clone());
                cx.output(&payload)?;
                Ok(Flow::Complete)
            }

            #[step]
            async fn after(&self, _cx: &mut StepCx<u8>) {}
        }
    };
}

timeout_workflow!(TimeoutPause, "diff.timeout.pause", "pause");
timeout_workflow!(TimeoutCancel, "diff.timeout.cancel", "cancel");
timeout_workflow!(TimeoutSkip, "diff.timeout.skip", "skip");
timeout_workflow!(TimeoutRun, "diff.timeout.run", "run");

fn event_names(projection: &Projection) -> Vec<&str> {
    projection.events.iter().map(|e| e.0.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_before_and_after_the_wait_and_the_predicate_agree() {
    let projections = both(
        |env| env.register(approvals()),
        |worker| worker.register(approvals()),
        |driver| async move {
            // Sent while `prepare` is still scheduled: `approve` takes it without parking.
            let early = driver.start::<Approvals>(&1).await;
            driver
                .signal(early, "approval", &serde_json::json!({"n": 1}))
                .await
                .expect("sent");
            // Parked first, then woken by the signal.
            let woken = driver.start::<Approvals>(&2).await;
            // The predicate turns two down (they stay unconsumed), then accepts one.
            let picky = driver.start::<Approvals>(&3).await;
            driver.run_until_idle().await;
            driver
                .signal(woken, "approval", &serde_json::json!({"n": 2}))
                .await
                .expect("sent");
            driver
                .signal(picky, "other.name", &serde_json::json!({"ok": true}))
                .await
                .expect("sent");
            driver.run_until_idle().await;
            for n in [1, 2] {
                driver
                    .signal(picky, "approval", &serde_json::json!({"ok": false, "n": n}))
                    .await
                    .expect("sent");
                driver.run_until_idle().await;
            }
            driver.advance(Duration::from_secs(5));
            driver
                .signal(picky, "approval", &serde_json::json!({"ok": true}))
                .await
                .expect("sent");
            drive(&driver).await;
            (driver, vec![early, woken, picky])
        },
    )
    .await;

    let [early, woken, picky] = &projections[..] else {
        unreachable!()
    };
    for run in [early, woken, picky] {
        assert_eq!(run.status, RunStatus::Finished, "{}", run.label);
    }
    assert!(!event_names(early).contains(&"step_waiting"));
    assert_eq!(early.steps[1].waiting_since_ms, None, "never parked");
    assert_eq!(early.signals[0].consumed_by, Some(1));
    let waiting = woken
        .events
        .iter()
        .find(|e| e.0 == "step_waiting")
        .expect("parked");
    assert_eq!(waiting.3.as_deref(), Some("signal `approval`"));
    assert_eq!(woken.steps[1].waiting_for.as_deref(), Some("approval"));
    assert_eq!(woken.steps[1].waiting_since_ms, Some(0));
    assert_eq!(
        woken
            .events
            .iter()
            .find(|e| e.0 == "signal_consumed")
            .and_then(|e| e.4.clone()),
        Some(serde_json::json!({"signal_id": "signal 0"}))
    );
    // Three parks of the same attempt: the turned-down signals wake it, in vain.
    assert_eq!(
        event_names(picky)
            .iter()
            .filter(|e| **e == "step_waiting")
            .count(),
        3
    );
    assert_eq!(picky.steps.len(), 3, "one attempt of each step");
    let consumed: Vec<Option<usize>> = picky.signals.iter().map(|g| g.consumed_by).collect();
    assert_eq!(consumed, [None, None, None, Some(1)]);
    assert_eq!(picky.signals[3].consumed_ms, Some(5_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_between_claim_and_park_wakes_the_row_the_same_way() {
    let hold = Arc::new(Hold::default());
    let projections = both(
        |env| {
            env.register(Approvals {
                hold: Arc::clone(&hold),
            })
        },
        |worker| {
            worker.register(Approvals {
                hold: Arc::clone(&hold),
            })
        },
        |driver| {
            let hold = Arc::clone(&hold);
            async move {
                let run = driver.start::<Approvals>(&1).await;
                driver.run_until_idle().await; // parks
                driver
                    .signal(run, "approval", &serde_json::json!({"ok": false}))
                    .await
                    .expect("sent");
                hold.arm();
                let running = driver.spawn_next();
                hold.entered.notified().await;
                // The gate holds the first signal in its predicate: the row is in
                // progress, so this one finds nothing waiting to wake.
                driver
                    .signal(run, "approval", &serde_json::json!({"ok": true}))
                    .await
                    .expect("sent");
                hold.release();
                running.await.expect("join");
                let view = driver.view(run).await;
                assert_eq!(
                    view.steps[1].status,
                    StepStatus::Scheduled,
                    "parked and woken at once"
                );
                drive(&driver).await;
                (driver, vec![run])
            }
        },
    )
    .await;
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Finished);
    assert_eq!(run.signals[1].consumed_by, Some(1));
    assert_eq!(run.signals[0].consumed_by, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_the_signal_its_first_attempt_took() {
    let projections = both(
        |env| env.register(approvals()),
        |worker| worker.register(approvals()),
        |driver| async move {
            let run = driver.start::<Approvals>(&1).await;
            driver.run_until_idle().await;
            driver
                .signal(run, "approval", &serde_json::json!({"flaky": true}))
                .await
                .expect("sent");
            driver.run_until_idle().await; // attempt 1 takes it and fails
            driver
                .signal(run, "approval", &serde_json::json!({"n": 2}))
                .await
                .expect("sent");
            driver.advance(Duration::from_secs(30));
            drive(&driver).await;
            (driver, vec![run])
        },
    )
    .await;
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Finished);
    let approve: Vec<&StepLine> = run.steps.iter().filter(|s| s.name == "approve").collect();
    assert_eq!(approve.len(), 2);
    assert_eq!(
        approve[1].output,
        Some(serde_json::json!({"payload": {"flaky": true}, "attempt": 2}))
    );
    assert_eq!(
        approve[1].waiting_since_ms, approve[0].waiting_since_ms,
        "a reattempt keeps the first park's time"
    );
    assert_eq!(run.signals[0].consumed_by, Some(1), "by the first attempt");
    assert_eq!(run.signals[1].consumed_by, None, "left for a later wait");
    assert_eq!(
        event_names(run)
            .iter()
            .filter(|e| **e == "signal_consumed")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_on_timeout_applies_the_same_way() {
    let projections = both(
        |env| {
            env.register(TimeoutPause)
                .register(TimeoutCancel)
                .register(TimeoutSkip)
                .register(TimeoutRun)
        },
        |worker| {
            worker
                .register(TimeoutPause)
                .register(TimeoutCancel)
                .register(TimeoutSkip)
                .register(TimeoutRun)
        },
        |driver| async move {
            let pause = driver.start::<TimeoutPause>(&1).await;
            let cancel = driver.start::<TimeoutCancel>(&1).await;
            let skip = driver.start::<TimeoutSkip>(&1).await;
            let run = driver.start::<TimeoutRun>(&1).await;
            // Past its deadline but not yet claimed: the signal still wins.
            let late_signal = driver.start::<TimeoutRun>(&2).await;
            driver.run_until_idle().await;
            driver.advance(Duration::from_secs(599));
            driver.run_until_idle().await;
            for id in [pause, cancel, skip, run] {
                assert_eq!(
                    driver.view(id).await.steps[0].status,
                    StepStatus::Waiting,
                    "9m59s is not 10m"
                );
            }
            driver.advance(Duration::from_secs(1));
            driver
                .signal(late_signal, "go", &serde_json::json!("just in time"))
                .await
                .expect("sent");
            driver.run_until_idle().await;
            let refused = driver.signal(cancel, "go", &1).await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("has ended (cancelled)")),
                "{refused:?}"
            );
            // The paused one: resuming waits afresh; a signal then ends the wait.
            driver.advance(Duration::from_mins(1));
            assert_eq!(
                driver.act(pause, Action::Resume, "wait again").await,
                Ok(RunStatus::Ready)
            );
            driver.run_until_idle().await;
            driver
                .signal(pause, "go", &serde_json::json!("at last"))
                .await
                .expect("sent");
            drive(&driver).await;
            (driver, vec![pause, cancel, skip, run, late_signal])
        },
    )
    .await;

    let [pause, cancel, skip, run, late_signal] = &projections[..] else {
        unreachable!()
    };
    let timed_out = |p: &Projection| {
        p.steps[0]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("WaitTimedOut"))
    };
    assert_eq!(pause.status, RunStatus::Finished);
    assert!(timed_out(pause));
    assert_eq!(pause.steps[0].outcome, Some(StepOutcome::Paused));
    assert_eq!(
        pause.steps[1].waiting_since_ms,
        Some(660_000),
        "resumed: a fresh wait"
    );
    assert_eq!(pause.steps[1].output, Some(serde_json::json!("at last")));
    assert_eq!(cancel.status, RunStatus::Cancelled);
    assert!(timed_out(cancel));
    assert_eq!(skip.status, RunStatus::Finished);
    assert!(timed_out(skip));
    assert_eq!(skip.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(run.status, RunStatus::Finished);
    assert!(!timed_out(run), "`run`: the body's own result");
    assert_eq!(run.steps[0].output, Some(serde_json::Value::Null));
    assert!(event_names(run).contains(&"wait_timed_out"));
    assert_eq!(late_signal.status, RunStatus::Finished);
    assert!(!event_names(late_signal).contains(&"wait_timed_out"));
    assert_eq!(
        late_signal.steps[0].output,
        Some(serde_json::json!("just in time"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_skip_around_a_waiting_step_agree() {
    let projections = both(
        |env| env.register(approvals()).register(TimeoutPause),
        |worker| worker.register(approvals()).register(TimeoutPause),
        |driver| async move {
            let signalled = driver.start::<Approvals>(&1).await;
            let unsignalled = driver.start::<Approvals>(&2).await;
            let skipped = driver.start::<Approvals>(&3).await;
            let early = driver.start::<Approvals>(&4).await;
            let expired = driver.start::<TimeoutPause>(&5).await;
            assert_eq!(
                driver.act(early, Action::Pause, "before it starts").await,
                Ok(RunStatus::Paused)
            );
            driver.run_until_idle().await; // the others park
            for run in [signalled, unsignalled, skipped, expired] {
                assert_eq!(
                    driver.act(run, Action::Pause, "hold on").await,
                    Ok(RunStatus::Paused)
                );
            }
            // A signal to a paused run: kept, and its waiting row woken, but
            // nothing runs until the run is resumed.
            driver
                .signal(signalled, "approval", &serde_json::json!({"n": 1}))
                .await
                .expect("sent");
            driver
                .signal(early, "approval", &serde_json::json!({"n": 4}))
                .await
                .expect("sent");
            driver.advance(Duration::from_mins(11));
            driver.run_until_idle().await;
            assert_eq!(
                driver.view(signalled).await.steps[1].status,
                StepStatus::Scheduled
            );
            let refused = driver.act(signalled, Action::Skip, "r").await;
            assert!(refused.is_ok(), "a woken row can be skipped: {refused:?}");
            for run in [unsignalled, early, expired] {
                assert_eq!(
                    driver.act(run, Action::Resume, "go on").await,
                    Ok(RunStatus::Ready)
                );
            }
            assert_eq!(
                driver
                    .act(skipped, Action::Skip, "no approval needed")
                    .await,
                Ok(RunStatus::Ready)
            );
            driver.run_until_idle().await;
            // Still waiting: nothing came.
            assert_eq!(
                driver.view(unsignalled).await.steps[1].status,
                StepStatus::Waiting
            );
            driver
                .signal(unsignalled, "approval", &serde_json::json!({"n": 2}))
                .await
                .expect("sent");
            drive(&driver).await;
            (
                driver,
                vec![signalled, unsignalled, skipped, early, expired],
            )
        },
    )
    .await;
    let [signalled, unsignalled, skipped, early, expired] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(signalled.status, RunStatus::Finished);
    assert_eq!(signalled.steps[1].outcome, Some(StepOutcome::Skipped));
    assert_eq!(signalled.signals[0].consumed_by, None, "skipped: not taken");
    assert_eq!(unsignalled.status, RunStatus::Finished);
    assert_eq!(unsignalled.signals[0].consumed_by, Some(1));
    assert_eq!(skipped.status, RunStatus::Finished);
    assert_eq!(skipped.steps[1].status, StepStatus::Skipped);
    assert_eq!(early.status, RunStatus::Finished);
    assert!(!event_names(early).contains(&"step_waiting"));
    assert_eq!(early.signals[0].consumed_by, Some(1));
    assert_eq!(expired.status, RunStatus::Paused, "timed out once resumed");
    assert!(event_names(expired).contains(&"wait_timed_out"));
}

// ---- fan_out: batches of child runs -------------------------------------------------

/// A child the parents start: `kids` for a nested fan_out.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Kid {
    /// A [`Child`] with its verb.
    Child(String),
    /// A [`Middle`] that fans out to children with these verbs.
    Middle(Vec<String>),
}

fn child(verb: &str) -> Kid {
    Kid::Child(verb.to_owned())
}

/// `act` by its verb (`finish`, `cancel`, `pause`; anything else goes on), then
/// `hold` waits for a `release` signal.
struct Child;

#[workflow(name = "diff.child", input = String, queue = "diff")]
impl Child {
    #[step]
    async fn act(&self, cx: &mut StepCx<String>) -> Flow {
        match cx.input().as_str() {
            "finish" => Flow::Finish,
            "cancel" => Flow::cancel("the child gives up"),
            "pause" => Flow::pause("the child asks an operator"),
            _ => Flow::Complete,
        }
    }

    #[step(wait_for = "release")]
    async fn hold(&self, _cx: &mut StepCx<String>) {}
}

/// A child that fans out in turn.
struct Middle;

#[workflow(name = "diff.middle", input = Vec<String>, queue = "diff")]
impl Middle {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<String>>, fan: &mut FanOut) -> StepResult {
        for verb in cx.input().clone() {
            fan.start::<Child>(&verb)?;
        }
        Ok(Flow::Complete)
    }
}

fn spread_kids(cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
    for kid in cx.input().clone() {
        match kid {
            Kid::Child(verb) => fan.start::<Child>(&verb)?,
            Kid::Middle(verbs) => fan.start::<Middle>(&verbs)?,
        }
    }
    cx.output(&serde_json::json!({ "kids": fan.len(), "attempt": cx.attempt() }))?;
    Ok(Flow::Complete)
}

/// `spread` fans out to its input's kids (`on_batch_failure` by the type), then
/// `after`.
macro_rules! parent_workflow {
    ($ty:ident, $name:literal $(, $on_failure:literal)?) => {
        struct $ty;

        #[workflow(name = $name, input = Vec<Kid>, queue = "diff")]
        impl $ty {
            #[fan_out($(on_batch_failure = $on_failure)?)]
            async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
                spread_kids(cx, fan)
            }

            #[step]
            async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
        }
    };
}

parent_workflow!(FanPause, "diff.fan.pause");
parent_workflow!(FanCancel, "diff.fan.cancel", "cancel");
parent_workflow!(FanSkip, "diff.fan.skip", "skip");

fn fan_env(env: TestEnv) -> TestEnv {
    env.register(Child)
        .register(Middle)
        .register(FanPause)
        .register(FanCancel)
        .register(FanSkip)
}

fn fan_worker(worker: pgbus_runtime::WorkerBuilder) -> pgbus_runtime::WorkerBuilder {
    worker
        .register(Child)
        .register(Middle)
        .register(FanPause)
        .register(FanCancel)
        .register(FanSkip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_children_all_finish_completes_the_same_way() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        let parent = driver
            .start::<FanPause>(&vec![child("finish"), child("hold"), child("finish")])
            .await;
        let empty = driver.start::<FanPause>(&vec![]).await;
        driver.run_until_idle().await;
        let children = driver.children(parent).await;
        assert_eq!(children.len(), 3);
        let report = driver.sweep_report().await;
        assert_eq!(
            (
                report.repaired,
                report.runs_deleted,
                report.batches_resolved
            ),
            (0, 0, 0),
            "a batch with a child still waiting is not stuck"
        );
        driver.advance(Duration::from_mins(1));
        driver
            .signal(children[1], "release", &serde_json::json!(null))
            .await
            .expect("sent");
        drive(&driver).await;
        let report = driver.sweep_report().await;
        assert_eq!(
            (
                report.repaired,
                report.runs_deleted,
                report.batches_resolved
            ),
            (0, 0, 0),
            "nothing stuck"
        );
        (driver, vec![parent, empty])
    })
    .await;
    let [parent, empty] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(parent.status, RunStatus::Finished);
    let batch = &parent.batches[0];
    assert_eq!(
        (
            batch.total,
            batch.finished,
            batch.cancelled,
            batch.status.as_str()
        ),
        (3, 3, 0, "succeeded")
    );
    assert_eq!(batch.parent_step, Some(0));
    assert_eq!(batch.resolved_ms, Some(60_000));
    assert_eq!(parent.steps[0].outcome, Some(StepOutcome::Completed));
    assert_eq!(
        parent.steps[0].output,
        Some(serde_json::json!({"kids": 3, "attempt": 1})),
        "the body's output, kept from its park"
    );
    let resolved = parent
        .events
        .iter()
        .find(|e| e.0 == "batch_resolved")
        .expect("batch_resolved");
    assert_eq!(
        resolved.4,
        Some(serde_json::json!({
            "batch_id": "r0/b0", "total": 3, "finished": 3, "cancelled": 0
        }))
    );
    for kid in &batch.children {
        assert_eq!(kid.status, RunStatus::Finished);
        assert_eq!(kid.parent_batch.as_deref(), Some("r0/b0"));
        assert_eq!(
            kid.events[0].4,
            Some(serde_json::json!({"parent_run_id": "r0", "batch_id": "r0/b0"}))
        );
        assert_eq!(kid.events[0].3.as_deref(), Some("fan_out"));
    }
    assert_eq!(empty.status, RunStatus::Finished);
    assert!(empty.batches.is_empty(), "an empty batch completes at once");
    assert!(!event_names(empty).contains(&"step_waiting"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_child_applies_each_on_batch_failure_the_same_way() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        let kids = vec![child("finish"), child("cancel")];
        let pause = driver.start::<FanPause>(&kids).await;
        let cancel = driver.start::<FanCancel>(&kids).await;
        let skip = driver.start::<FanSkip>(&kids).await;
        // An operator cancels a waiting child.
        let by_hand = driver.start::<FanSkip>(&vec![child("hold")]).await;
        // Paused on FanOutFailed, then skipped by an operator.
        let passed_over = driver.start::<FanPause>(&kids).await;
        driver.run_until_idle().await;
        assert_eq!(
            driver
                .act(passed_over, Action::Skip, "bill the rest by hand")
                .await,
            Ok(RunStatus::Ready)
        );
        let held = driver.children(by_hand).await;
        assert_eq!(
            driver.act(held[0], Action::Cancel, "not needed").await,
            Ok(RunStatus::Cancelled)
        );
        drive(&driver).await;
        (driver, vec![pause, cancel, skip, by_hand, passed_over])
    })
    .await;
    let [pause, cancel, skip, by_hand, passed_over] = &projections[..] else {
        unreachable!()
    };
    let fan_out_failed = |p: &Projection| {
        p.steps[0]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("FanOutFailed"))
    };
    assert_eq!(pause.status, RunStatus::Paused);
    assert!(fan_out_failed(pause));
    assert!(
        pause
            .error
            .1
            .as_deref()
            .is_some_and(|m| m.contains("1 of 2 child runs were cancelled")),
        "{:?}",
        pause.error
    );
    assert_eq!(cancel.status, RunStatus::Cancelled);
    assert!(fan_out_failed(cancel));
    assert_eq!(skip.status, RunStatus::Finished);
    assert_eq!(skip.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(by_hand.status, RunStatus::Finished);
    assert_eq!(by_hand.batches[0].status, "failed");
    assert_eq!(by_hand.batches[0].children[0].status, RunStatus::Cancelled);
    assert_eq!(passed_over.status, RunStatus::Finished);
    assert_eq!(
        passed_over.error,
        (None, None),
        "the skip cleared the error"
    );
    assert_eq!(passed_over.steps.len(), 2, "no new batch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_cascades_to_children_and_grandchildren_the_same_way() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        let parent = driver
            .start::<FanPause>(&vec![
                Kid::Middle(vec!["hold".to_owned(), "finish".to_owned()]),
                child("hold"),
                child("finish"),
            ])
            .await;
        driver.run_until_idle().await;
        driver.advance(Duration::from_secs(5));
        assert_eq!(
            driver.act(parent, Action::Cancel, "stop everything").await,
            Ok(RunStatus::Cancelled)
        );
        drive(&driver).await;
        assert_eq!(driver.sweep_report().await.batches_resolved, 0);
        (driver, vec![parent])
    })
    .await;
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Cancelled);
    let batch = &parent.batches[0];
    assert_eq!(
        (batch.finished, batch.cancelled, batch.status.as_str()),
        (1, 0, "failed"),
        "closed by the cancel, not counted"
    );
    let statuses: Vec<RunStatus> = batch.children.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Cancelled,
            RunStatus::Cancelled,
            RunStatus::Finished
        ]
    );
    let middle = &batch.children[0];
    assert_eq!(middle.batches[0].status, "failed");
    let grandchildren: Vec<RunStatus> = middle.batches[0]
        .children
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(grandchildren, [RunStatus::Cancelled, RunStatus::Finished]);
    let cascaded = middle.batches[0].children[0].events.last().expect("events");
    assert_eq!(cascaded.0, "cancelled");
    assert_eq!(cascaded.3.as_deref(), Some("parent run r0 was cancelled"));
    assert_eq!(
        cascaded.4,
        Some(serde_json::json!({"cancelled_with": "r0"}))
    );
    assert_eq!(
        middle.batches[0].children[0].times_ms.3,
        Some(5_000),
        "cancelled_at"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_failed_fan_out_starts_a_fresh_batch_the_same_way() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        let parent = driver.start::<FanPause>(&vec![child("hold")]).await;
        driver.run_until_idle().await;
        let first = driver.children(parent).await;
        assert_eq!(
            driver.act(first[0], Action::Cancel, "wrong one").await,
            Ok(RunStatus::Cancelled)
        );
        driver.run_until_idle().await;
        assert_eq!(driver.view(parent).await.run.status, RunStatus::Paused);
        driver.advance(Duration::from_secs(30));
        assert_eq!(
            driver.act(parent, Action::Resume, "try again").await,
            Ok(RunStatus::Ready)
        );
        driver.run_until_idle().await;
        let all = driver.children(parent).await;
        assert_eq!(all.len(), 2);
        driver
            .signal(all[1], "release", &serde_json::json!(null))
            .await
            .expect("sent");
        drive(&driver).await;
        (driver, vec![parent])
    })
    .await;
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Finished);
    let batches: Vec<(Option<usize>, &str)> = parent
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str()))
        .collect();
    assert_eq!(batches, [(Some(0), "failed"), (Some(1), "succeeded")]);
    assert_eq!(parent.steps[1].attempt, 2);
    assert_eq!(
        parent.steps[1].output,
        Some(serde_json::json!({"kids": 1, "attempt": 2}))
    );
}

/// Waits for a `go` its predicate accepts, for 10 minutes, then skips.
struct PickyTimeout;

#[workflow(name = "diff.picky_timeout", input = u8, queue = "diff")]
impl PickyTimeout {
    fn accepts(&self, _cx: &StepCx<u8>, signal: &Signal) -> bool {
        signal.payload["ok"] != false
    }

    #[step(wait_for(name = "go", matches = accepts), wait_timeout = "10m", on_timeout = "skip")]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

/// Two steps that wait for the same signal name: each consumes its own.
struct TwoWaits;

#[workflow(name = "diff.two_waits", input = u8, queue = "diff")]
impl TwoWaits {
    #[step(wait_for = "go")]
    async fn first(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }

    #[step(wait_for = "go")]
    async fn second(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turned_down_signal_does_not_restart_the_timeout_and_each_wait_takes_its_own() {
    let projections = both(
        |env| env.register(PickyTimeout).register(TwoWaits),
        |worker| worker.register(PickyTimeout).register(TwoWaits),
        |driver| async move {
            let picky = driver.start::<PickyTimeout>(&1).await;
            let both_early = driver.start::<TwoWaits>(&2).await;
            let one_early = driver.start::<TwoWaits>(&3).await;
            for n in [1, 2] {
                driver
                    .signal(both_early, "go", &serde_json::json!(n))
                    .await
                    .expect("sent");
            }
            driver
                .signal(one_early, "go", &serde_json::json!(1))
                .await
                .expect("sent");
            driver.run_until_idle().await;
            driver.advance(Duration::from_mins(5));
            driver
                .signal(picky, "go", &serde_json::json!({"ok": false}))
                .await
                .expect("sent");
            driver.run_until_idle().await; // turned down: parks again, same deadline
            driver.advance(Duration::from_secs(299));
            driver.run_until_idle().await;
            assert_eq!(
                driver.view(picky).await.steps[0].status,
                StepStatus::Waiting,
                "9m59s after the first park"
            );
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await;
            driver
                .signal(one_early, "go", &serde_json::json!(2))
                .await
                .expect("sent");
            drive(&driver).await;
            (driver, vec![picky, both_early, one_early])
        },
    )
    .await;
    let [picky, both_early, one_early] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(picky.status, RunStatus::Finished);
    assert_eq!(picky.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(picky.steps[0].waiting_since_ms, Some(0));
    assert_eq!(picky.steps[0].times_ms.2, Some(600_000), "timed out at 10m");
    assert_eq!(picky.signals[0].consumed_by, None);
    for run in [both_early, one_early] {
        assert_eq!(run.status, RunStatus::Finished);
        let outputs: Vec<Option<serde_json::Value>> =
            run.steps.iter().map(|s| s.output.clone()).collect();
        assert_eq!(
            outputs,
            [Some(serde_json::json!(1)), Some(serde_json::json!(2))]
        );
        let consumers: Vec<Option<usize>> = run.signals.iter().map(|g| g.consumed_by).collect();
        assert_eq!(consumers, [Some(0), Some(1)]);
    }
    assert!(!event_names(both_early).contains(&"step_waiting"));
    assert!(event_names(one_early).contains(&"step_waiting"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_on_parents_and_middle_children_agree() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        // A middle child cancelled by hand: its children go with it, and it
        // counts as cancelled in its parent's batch (skip: the parent goes on).
        let skipper = driver
            .start::<FanSkip>(&vec![Kid::Middle(vec!["hold".to_owned()]), child("finish")])
            .await;
        // A parent paused while its batch resolves: woken, but it waits for resume.
        let paused = driver.start::<FanPause>(&vec![child("hold")]).await;
        // A parent whose waiting fan_out step an operator skips: the batch
        // stays open, resolves later, and wakes nothing.
        let skipped = driver.start::<FanPause>(&vec![child("hold")]).await;
        // A child that pauses: the batch waits for it; cancelling it fails the batch.
        let pausing = driver.start::<FanPause>(&vec![child("pause")]).await;
        driver.run_until_idle().await;

        let middle = driver.children(skipper).await[0];
        assert_eq!(
            driver.act(middle, Action::Cancel, "not this branch").await,
            Ok(RunStatus::Cancelled)
        );
        assert_eq!(
            driver.act(paused, Action::Pause, "hold on").await,
            Ok(RunStatus::Paused)
        );
        let held = driver.children(paused).await[0];
        driver
            .signal(held, "release", &serde_json::json!(null))
            .await
            .expect("sent");
        assert_eq!(
            driver.act(skipped, Action::Pause, "r").await,
            Ok(RunStatus::Paused)
        );
        assert_eq!(
            driver.act(skipped, Action::Skip, "do not wait").await,
            Ok(RunStatus::Ready)
        );
        driver.run_until_idle().await;
        assert_eq!(
            driver.view(paused).await.steps[0].status,
            StepStatus::Scheduled,
            "woken while paused"
        );
        driver.advance(Duration::from_secs(10));
        assert_eq!(
            driver.act(paused, Action::Resume, "go on").await,
            Ok(RunStatus::Ready)
        );
        let late = driver.children(skipped).await[0];
        driver
            .signal(late, "release", &serde_json::json!(null))
            .await
            .expect("sent");
        let paused_child = driver.children(pausing).await[0];
        assert_eq!(
            driver.act(paused_child, Action::Cancel, "give up").await,
            Ok(RunStatus::Cancelled)
        );
        drive(&driver).await;
        assert_eq!(driver.sweep_report().await.batches_resolved, 0);
        (driver, vec![skipper, paused, skipped, pausing])
    })
    .await;
    let [skipper, paused, skipped, pausing] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(skipper.status, RunStatus::Finished);
    let batch = &skipper.batches[0];
    assert_eq!((batch.finished, batch.cancelled), (1, 1));
    let middle = &batch.children[0];
    assert_eq!(middle.batches[0].status, "failed");
    assert_eq!(middle.batches[0].children[0].status, RunStatus::Cancelled);
    assert_eq!(paused.status, RunStatus::Finished);
    assert_eq!(
        paused.steps[0].times_ms.2,
        Some(10_000),
        "completed on resume"
    );
    assert_eq!(skipped.status, RunStatus::Finished);
    assert_eq!(skipped.steps[0].outcome, Some(StepOutcome::Skipped));
    assert_eq!(skipped.batches[0].status, "succeeded");
    assert!(!event_names(skipped).contains(&"batch_resolved"));
    assert_eq!(pausing.status, RunStatus::Paused);
    assert_eq!(pausing.batches[0].status, "failed");
}

// ---- signal pages ---------------------------------------------------------------------

/// Takes only `{"ok": true}` signals named `s`, counting every call of its
/// predicate; waits 10 minutes (`on_timeout` pause).
struct Counted {
    calls: Arc<AtomicUsize>,
}

#[workflow(name = "diff.counted", input = u8, queue = "diff")]
impl Counted {
    fn ok(&self, _cx: &StepCx<u8>, signal: &Signal) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        signal.payload["ok"] == true
    }

    #[step(wait_for(name = "s", matches = ok), wait_timeout = "10m")]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

/// Sends `count` signals `s` that `Counted` turns down.
async fn turned_down(driver: &Driver, run: RunId, count: usize) {
    for n in 0..count {
        driver
            .signal(run, "s", &serde_json::json!({"ok": false, "n": n}))
            .await
            .expect("sent");
    }
}

fn count_events(projection: &Projection, event: &str) -> usize {
    event_names(projection)
        .iter()
        .filter(|e| **e == event)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // three runs through their pages, then the checks
async fn signal_pages_are_judged_once_and_the_timeout_waits_for_the_last_page_the_same_way() {
    let memory_calls = Arc::new(AtomicUsize::new(0));
    let pg_calls = Arc::new(AtomicUsize::new(0));
    let (memory_for_env, pg_for_worker) = (Arc::clone(&memory_calls), Arc::clone(&pg_calls));
    let projections = both(
        move |env| {
            env.register(Counted {
                calls: Arc::clone(&memory_for_env),
            })
        },
        move |worker| {
            worker.register(Counted {
                calls: pg_for_worker,
            })
        },
        |driver| {
            let calls = match &driver {
                Driver::Memory(_) => Arc::clone(&memory_calls),
                Driver::Postgres { .. } => Arc::clone(&pg_calls),
            };
            async move {
                let paged = driver.start::<Counted>(&1).await;
                let wins = driver.start::<Counted>(&2).await;
                let loses = driver.start::<Counted>(&3).await;
                driver.run_until_idle().await; // all three park
                assert_eq!(calls.load(Ordering::SeqCst), 0);

                // 20 turned down: pages of 8, 8 and 4, each signal judged once.
                turned_down(&driver, paged, 20).await;
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 20);
                assert_eq!(
                    driver.view(paged).await.steps[0].status,
                    StepStatus::Waiting
                );
                // The match that wakes it is the only signal judged.
                driver
                    .signal(paged, "s", &serde_json::json!({"ok": true}))
                    .await
                    .expect("sent");
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 21, "none judged twice");

                // Past the deadline before any claim looked: the match behind
                // two full pages wins; with none, the short last page times out.
                turned_down(&driver, wins, 20).await;
                driver
                    .signal(wins, "s", &serde_json::json!({"ok": true}))
                    .await
                    .expect("sent");
                turned_down(&driver, loses, 20).await;
                driver.advance(Duration::from_secs(601));
                driver.run_until_idle().await;
                assert_eq!(calls.load(Ordering::SeqCst), 21 + 21 + 20);
                (driver, vec![paged, wins, loses])
            }
        },
    )
    .await;
    assert_eq!(memory_calls.load(Ordering::SeqCst), 62);
    assert_eq!(pg_calls.load(Ordering::SeqCst), 62);

    let [paged, wins, loses] = &projections[..] else {
        unreachable!()
    };
    assert_eq!(paged.status, RunStatus::Finished);
    assert_eq!(paged.steps.len(), 1, "one attempt");
    assert_eq!(paged.steps[0].output, Some(serde_json::json!({"ok": true})));
    // Parked with nothing, after each page; claimed once more for the match.
    assert_eq!(count_events(paged, "step_waiting"), 4);
    assert_eq!(count_events(paged, "step_started"), 5);
    let consumed: Vec<Option<usize>> = paged.signals.iter().map(|g| g.consumed_by).collect();
    let mut expected = vec![None; 20];
    expected.push(Some(0));
    assert_eq!(consumed, expected, "the 20 turned down stay unconsumed");

    assert_eq!(wins.status, RunStatus::Finished);
    assert_eq!(wins.steps[0].output, Some(serde_json::json!({"ok": true})));
    assert_eq!(count_events(wins, "wait_timed_out"), 0);
    assert_eq!(count_events(wins, "signal_consumed"), 1);
    assert_eq!(wins.signals[20].consumed_by, Some(0));
    assert_eq!(count_events(wins, "step_waiting"), 3);

    assert_eq!(loses.status, RunStatus::Paused);
    assert!(
        loses.steps[0]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("WaitTimedOut"))
    );
    assert_eq!(count_events(loses, "wait_timed_out"), 1);
    assert_eq!(count_events(loses, "step_waiting"), 3);
    assert!(loses.signals.iter().all(|g| g.consumed_by.is_none()));
}

// ---- a fan_out parent's claim lost with its worker -------------------------------

/// Past the lost-worker threshold, one sweep pauses every run whose attempt a
/// dead worker held; an operator resumes each.
async fn sweep_and_resume(driver: &Driver, runs: &[RunId]) {
    driver.advance(Duration::from_secs(31));
    assert_eq!(driver.sweep().await, (runs.len(), 0));
    for run in runs {
        assert_eq!(driver.view(*run).await.run.status, RunStatus::Paused);
        assert_eq!(
            driver.act(*run, Action::Resume, "the worker is gone").await,
            Ok(RunStatus::Ready)
        );
    }
}

fn stalled(projection: &Projection) -> bool {
    projection.steps[0]
        .error
        .0
        .as_deref()
        .is_some_and(|class| class.ends_with("StepStalled"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_batch_resolved_is_swept_and_resumed_the_same_way() {
    let projections = both(fan_env, fan_worker, |driver| async move {
        let succeeded = driver
            .start::<FanPause>(&vec![child("finish"), child("hold")])
            .await;
        let failed = driver
            .start::<FanPause>(&vec![child("cancel"), child("hold")])
            .await;
        driver.run_until_idle().await;
        for parent in [succeeded, failed] {
            let kids = driver.children(parent).await;
            driver
                .signal(kids[1], "release", &serde_json::json!(null))
                .await
                .expect("sent");
            driver.run_one().await; // the last child ends: its batch wakes the parent
            assert_eq!(
                driver.view(parent).await.steps[0].status,
                StepStatus::Scheduled
            );
            assert_eq!(driver.claim_and_die().await, parent);
        }
        sweep_and_resume(&driver, &[succeeded, failed]).await;
        drive(&driver).await;
        (driver, vec![succeeded, failed])
    })
    .await;
    let [succeeded, failed] = &projections[..] else {
        unreachable!()
    };
    // The batch that succeeded decides the resumed attempt: no second batch,
    // and the body does not run (the attempt has no output of its own).
    assert_eq!(succeeded.status, RunStatus::Finished);
    assert!(stalled(succeeded));
    let rows: Vec<(&str, i32, Option<StepOutcome>)> = succeeded
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.attempt, s.outcome))
        .collect();
    assert_eq!(
        rows,
        [
            ("spread", 1, Some(StepOutcome::Paused)),
            ("spread", 2, Some(StepOutcome::Completed)),
            ("after", 1, Some(StepOutcome::Completed)),
        ]
    );
    assert_eq!(
        succeeded.steps[1].output,
        Some(serde_json::json!({"attempt": 1, "kids": 2})),
        "the body did not run again: attempt 2 keeps attempt 1's output"
    );
    assert_eq!(succeeded.batches.len(), 1);
    assert_eq!(succeeded.batches[0].parent_step, Some(0));
    assert_eq!(succeeded.batches[0].children.len(), 2);
    // The failed one is not taken over: the resumed attempt starts a fresh batch.
    assert!(stalled(failed));
    let batches: Vec<(Option<usize>, &str, usize)> = failed
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str(), b.children.len()))
        .collect();
    assert_eq!(batches, [(Some(0), "failed", 2), (Some(1), "open", 2)]);
    assert_eq!(
        failed.steps[1].output,
        Some(serde_json::json!({"kids": 2, "attempt": 2}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_attempt_takes_over_an_open_batch_the_same_way() {
    let projections = both(
        |env| fan_env(env.retention(None)),
        |worker| fan_worker(worker.retention(None)),
        |driver| async move {
            let parent = driver
                .start::<FanPause>(&vec![child("finish"), child("hold")])
                .await;
            driver.run_one().await; // parks
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await; // one child finishes, the other waits
            // The parked row comes due at the end of its longest wait while a
            // child still waits; a worker claims it and dies.
            driver.advance(Duration::from_millis(pgbus_runtime::MAX_DURATION_MS));
            assert_eq!(driver.claim_and_die().await, parent);
            sweep_and_resume(&driver, &[parent]).await;
            driver.run_until_idle().await;
            let view = driver.view(parent).await;
            assert_eq!(view.steps[1].status, StepStatus::Waiting);
            assert_eq!(
                view.batches[0].parent_step_id, view.steps[1].id,
                "taken over"
            );
            let kids = driver.children(parent).await;
            driver
                .signal(kids[1], "release", &serde_json::json!(null))
                .await
                .expect("sent");
            drive(&driver).await;
            (driver, vec![parent])
        },
    )
    .await;
    let parent = &projections[0];
    assert_eq!(parent.status, RunStatus::Finished);
    assert!(stalled(parent));
    assert_eq!(parent.steps[1].outcome, Some(StepOutcome::Completed));
    assert_eq!(
        parent.steps[1].output,
        Some(serde_json::json!({"attempt": 1, "kids": 2})),
        "the body did not run again: attempt 2 keeps attempt 1's output"
    );
    let batches: Vec<(Option<usize>, &str, i32)> = parent
        .batches
        .iter()
        .map(|b| (b.parent_step, b.status.as_str(), b.finished))
        .collect();
    assert_eq!(batches, [(Some(1), "succeeded", 2)]);
    let resolved = parent
        .events
        .iter()
        .find(|e| e.0 == "batch_resolved")
        .expect("batch_resolved");
    assert_eq!(resolved.2, Some(2), "it woke the new attempt");
}

// ---- a reattempt of a wait that timed out -------------------------------------------

/// `on_timeout = "run"` with a reattempt policy: a body that finds no signal
/// fails, and is reattempted once.
struct RunRetry;

#[workflow(name = "diff.run_retry", input = u8, queue = "diff")]
impl RunRetry {
    #[step(
        wait_for = "go",
        wait_timeout = "10m",
        on_timeout = "run",
        on_exception(matching(Flaky), action = "reattempt", wait = "1s", max_reattempts = 1)
    )]
    async fn wait(&self, cx: &mut StepCx<u8>) -> StepResult {
        let Some(payload) = cx.signal().map(|s| s.payload.clone()) else {
            return Err(StepError::from(Flaky(cx.attempt())));
        };
        cx.output(&payload)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_its_timeout_again_and_a_resume_waits_afresh_the_same_way() {
    let projections = both(
        |env| env.register(RunRetry).register(TimeoutPause),
        |worker| worker.register(RunRetry).register(TimeoutPause),
        |driver| async move {
            let retry = driver.start::<RunRetry>(&1).await;
            let paused = driver.start::<TimeoutPause>(&1).await;
            driver.run_until_idle().await;
            driver.advance(Duration::from_mins(10));
            driver.run_until_idle().await;
            // Sent after each timeout was decided.
            driver
                .signal(retry, "go", &serde_json::json!("late"))
                .await
                .expect("sent");
            driver
                .signal(paused, "go", &serde_json::json!("while paused"))
                .await
                .expect("sent");
            driver.advance(Duration::from_secs(1));
            driver.run_until_idle().await;
            let view = driver.view(retry).await;
            assert_eq!(view.run.status, RunStatus::Paused, "reattempts used up");
            assert_eq!(view.signals[0].consumed_by, None);
            driver.advance(Duration::from_mins(1));
            for run in [retry, paused] {
                assert_eq!(
                    driver.act(run, Action::Resume, "go on").await,
                    Ok(RunStatus::Ready)
                );
            }
            drive(&driver).await;
            (driver, vec![retry, paused])
        },
    )
    .await;
    let [retry, paused] = &projections[..] else {
        unreachable!()
    };
    let timed_out: Vec<Option<i32>> = retry
        .events
        .iter()
        .filter(|e| e.0 == "wait_timed_out")
        .map(|e| e.2)
        .collect();
    assert_eq!(
        timed_out,
        [Some(1), Some(2)],
        "the reattempt timed out again"
    );
    let rows: Vec<(i32, Option<StepOutcome>)> = retry
        .steps
        .iter()
        .filter(|s| s.name == "wait")
        .map(|s| (s.attempt, s.outcome))
        .collect();
    assert_eq!(
        rows,
        [
            (1, Some(StepOutcome::Reattempted)),
            (2, Some(StepOutcome::Paused)),
            (3, Some(StepOutcome::Completed)),
        ]
    );
    assert!(
        retry.steps[1]
            .error
            .0
            .as_deref()
            .is_some_and(|class| class.ends_with("Flaky")),
        "attempt 2's body ran without a signal"
    );
    assert_eq!(retry.status, RunStatus::Finished);
    assert_eq!(retry.steps[2].output, Some(serde_json::json!("late")));
    assert_eq!(retry.steps[2].waiting_since_ms, None, "it never parked");
    assert_eq!(
        retry.signals[0].consumed_by,
        Some(2),
        "by the resumed attempt"
    );

    assert_eq!(paused.status, RunStatus::Finished);
    assert_eq!(count_events(paused, "wait_timed_out"), 1);
    assert_eq!(
        paused.steps[1].output,
        Some(serde_json::json!("while paused"))
    );
    assert_eq!(paused.steps[1].waiting_since_ms, None, "it never parked");
    assert_eq!(paused.signals[0].consumed_by, Some(1));
}
