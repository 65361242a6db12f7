//! The differential suite: the same scenarios through the memory store and the
//! Postgres store (a real worker on a pinned clock) must leave the same runs, step
//! histories and events, ids and actors aside. A change to one store that the
//! other lacks fails here.

use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    Action, Client, Clock, Error, ManualClock, RunStatus, RunView, StallAction, StepOutcome,
    StepStatus, Worker,
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
            Self::Memory(env) => env.start::<W>(input).expect("start"),
            Self::Postgres { client, .. } => client.start::<W>(input).await.expect("start"),
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

/// A run as both stores must agree on it: everything but ids and actors, times as
/// offsets from the run's start.
#[derive(Debug, PartialEq)]
struct Projection {
    status: RunStatus,
    current_step: Option<String>,
    error: (Option<String>, Option<String>),
    digest: String,
    steps: Vec<StepLine>,
    events: Vec<EventLine>,
}

/// Event name, step name, attempt, reason, details.
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
    times_ms: (i64, Option<i64>, Option<i64>),
    output: Option<serde_json::Value>,
    error: (Option<String>, Option<String>, Vec<String>),
}

fn project(view: &RunView) -> Projection {
    let start = view.run.created_at;
    let offset = |t: chrono::DateTime<chrono::Utc>| (t - start).num_milliseconds();
    Projection {
        status: view.run.status,
        current_step: view.run.current_step.clone(),
        error: (view.error_class.clone(), view.error_message.clone()),
        digest: view.definition_digest.clone(),
        steps: view
            .steps
            .iter()
            .map(|s| StepLine {
                name: s.step_name.clone(),
                attempt: s.attempt,
                status: s.status,
                outcome: s.outcome,
                queue: s.queue.clone(),
                priority: s.priority,
                times_ms: (
                    offset(s.scheduled_at),
                    s.started_at.map(offset),
                    s.finished_at.map(offset),
                ),
                output: s.output.clone(),
                error: (
                    s.error_class.clone(),
                    s.error_message.clone(),
                    s.error_causes.clone(),
                ),
            })
            .collect(),
        events: view
            .events
            .iter()
            .map(|e| {
                (
                    e.event.clone(),
                    e.step_name.clone(),
                    e.attempt,
                    e.reason.clone(),
                    e.details.clone(),
                )
            })
            .collect(),
    }
}

/// Runs `scenario` on both stores and compares every run it returns.
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
    let mut projections = Vec::new();
    for (m, p) in memory_runs.iter().zip(&pg_runs) {
        let left = project(&memory.view(*m).await);
        let right = project(&postgres.view(*p).await);
        assert_eq!(
            left, right,
            "memory (left) and Postgres (right) disagree on a run"
        );
        projections.push(left);
    }
    projections
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
    let memory_run = env.start::<Gated>(&1).expect("start");
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
    let pg_run = client.start::<Gated>(&1).await.expect("start");
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
