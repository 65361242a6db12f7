//! The differential suite: the same scenarios through the memory store and the
//! Postgres store (on a pinned clock) must leave the same runs, step histories
//! and events, ids and actors aside. A change to one store that the other lacks
//! fails here.
//!
//! Each scenario is one function generic over the store ([`Rig`]), driving it
//! through the store contract, the runtime's step loop and its sweep (see
//! [`Harness`]); [`both!`] runs it on each store and compares what it left.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    Action, BatchStatus, RunStatus, RunView, StallAction, StepOutcome, StepStatus,
};

#[macro_use]
mod harness;
mod bounded_reads;
mod crashes;
mod fan_out;
mod flow;
mod rigs;
mod signals;
mod timeouts;
mod verbs;

use harness::{Harness, Pace};
use rigs::{Memory, Pinned, Rig};

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

// ---- one scenario, two stores: what they must agree on -------------------------

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
    /// The concurrency limit holding it back, the rate it waits for.
    held_by: Option<String>,
    throttled_by: Option<String>,
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
    status: BatchStatus,
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
        held_by: s.held_by.clone(),
        throttled_by: s.throttled_by.clone(),
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
                status: b.status,
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
async fn project_all<R: Rig>(harness: &Harness<R>, roots: &[RunId]) -> (Vec<Projection>, usize) {
    let mut ids = Ids {
        views: harness.all_views().await,
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

/// Compares every run a scenario returned on each store (see [`both!`]), with
/// its fan_out children, and how many runs each store holds; the memory
/// store's projections.
async fn compare<A: Rig, B: Rig>(
    (memory, memory_runs): (Harness<A>, Vec<RunId>),
    (postgres, pg_runs): (Harness<B>, Vec<RunId>),
) -> Vec<Projection> {
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
    // What a wait for each run's result reads (issue 20), ids aside.
    for (left, right) in memory_runs.iter().zip(&pg_runs) {
        assert_eq!(
            result_read(&memory, *left).await,
            result_read(&postgres, *right).await,
            "memory (left) and Postgres (right) disagree on a run's result"
        );
    }
    // `DIFF_DUMP=1 cargo test ... -- --nocapture` shows what was compared.
    if std::env::var_os("DIFF_DUMP").is_some() {
        eprintln!("{left:#?}\n=== postgres\n{right:#?}");
    }
    left
}

/// Workflow, status, the attempt that finished the run, reason, error.
type ResultLine = (
    String,
    RunStatus,
    Option<pgbus_runtime::LastAttempt>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// A run's `ResultView` without its id: status, the attempt that finished
/// it (with its output), the reason and the error.
async fn result_read<R: Rig>(harness: &Harness<R>, run: RunId) -> ResultLine {
    use pgbus_runtime::store::Store as _;
    let view = harness
        .store()
        .run_result(run)
        .await
        .expect("a returned run exists");
    (
        view.workflow,
        view.status,
        view.last_attempt,
        view.reason,
        view.error_class,
        view.error_message,
    )
}

/// Start, then alternate running and moving time until nothing is left.
async fn drive<R: Rig>(harness: &Harness<R>) {
    for minutes in [0, 1, 1, 2, 5, 10] {
        harness.advance(Duration::from_secs(60 * minutes));
        harness.run_until_idle().await;
    }
}
