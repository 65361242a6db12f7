//! Errors, exception policies and guards on a real worker: what the step and run
//! rows keep of an error, which policy answers, how often a body runs, what is
//! reported, and guards that cancel, skip or fail.

use std::any::type_name;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ErrorReport, Panicked, RunId, RunStatus, StepStatus};

use crate::pg::{TestDb, at_ms, events, step, steps, t0};

#[derive(Debug, thiserror::Error)]
#[error("layer {depth}")]
struct Layered {
    depth: u32,
    #[source]
    source: Option<Box<Layered>>,
}

impl Layered {
    fn chain(depth: u32) -> Self {
        Self {
            depth,
            source: (depth > 1).then(|| Box::new(Self::chain(depth - 1))),
        }
    }
}

/// What `Failing::fail` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Failure {
    Layered,
    LongMessage,
    Panic,
    Sleep,
    Nothing,
}

struct Failing;

#[workflow(name = "policy.failing", input = Failure)]
impl Failing {
    #[step(
        timeout = "50ms",
        on_exception(matching(Panicked), action = "skip"),
        on_exception(matching(Timeout), action = "cancel")
    )]
    async fn fail(&self, cx: &mut StepCx<Failure>) -> StepResult {
        match cx.input() {
            Failure::Layered => Err(Layered::chain(8).into()),
            Failure::LongMessage => Err(StepError::msg("é".repeat(25_000))),
            Failure::Panic => panic!("boom in the body"),
            Failure::Sleep => {
                // Longer than the step's 50 ms timeout; the timeout bounds it.
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(Flow::Complete)
            }
            Failure::Nothing => Ok(Flow::Complete),
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Failure>) {}
}

async fn run_failing(t: &TestDb, failure: Failure) -> pgbus_runtime::RunView {
    let worker = t.db.worker().register(Failing).build().expect("worker");
    let run_id = t
        .client()
        .start::<Failing>(&failure)
        .await
        .expect("start")
        .run_id;
    worker.run_until_idle().await.expect("run");
    t.run(run_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_keeps_its_class_message_and_causes_on_the_rows() {
    let t = TestDb::new().await;
    let view = run_failing(&t, Failure::Layered).await;
    assert_eq!(view.run.status, RunStatus::Paused, "no policy: pause");
    assert_eq!(steps(&view), ["fail#1 failed/paused"]);
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:fail#1",
            "step_failed:fail#1",
            "paused"
        ]
    );
    let row = step(&view, "fail", 1);
    assert_eq!(row.error_class.as_deref(), Some(type_name::<Layered>()));
    assert_eq!(row.error_message.as_deref(), Some("layer 8"));
    assert_eq!(
        row.error_causes,
        ["layer 7", "layer 6", "layer 5", "layer 4", "layer 3"],
        "the nearest five causes"
    );
    assert_eq!(row.output, None);
    // The run keeps the error it paused on.
    assert_eq!(view.error_class, row.error_class);
    assert_eq!(view.error_message, row.error_message);
    assert_eq!(view.paused_at, Some(t0()));
    assert_eq!(
        view.events[3].reason.as_deref(),
        Some("step failed: layer 8")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_error_message_is_capped() {
    let t = TestDb::new().await;
    let view = run_failing(&t, Failure::LongMessage).await;
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Message")
    );
    let message = row.error_message.as_deref().expect("a message");
    assert_eq!(message.chars().count(), 10_000);
    assert!(message.starts_with("éé"));
    assert!(message.ends_with('…'));
    assert_eq!(view.error_message.as_deref(), Some(message));
    let reason = view.events[3].reason.as_deref().expect("a reason");
    assert!(
        reason.chars().count() <= 10_100,
        "the reason is bounded too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_is_a_panicked_error_and_the_worker_lives_on() {
    let t = TestDb::new().await;
    let worker = t.db.worker().register(Failing).build().expect("worker");
    let client = t.client();
    let panicked = client
        .start::<Failing>(&Failure::Panic)
        .await
        .expect("start")
        .run_id;
    let fine = client
        .start::<Failing>(&Failure::Nothing)
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);

    let view = t.run(panicked).await;
    assert_eq!(
        view.run.status,
        RunStatus::Finished,
        "skipped by its policy"
    );
    assert_eq!(
        steps(&view),
        ["fail#1 failed/skipped", "after#1 completed/completed"]
    );
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Panicked")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("step panicked: boom in the body")
    );
    assert_eq!(t.run(fine).await.run.status, RunStatus::Finished);

    // And again, on the same worker.
    let again = client
        .start::<Failing>(&Failure::Panic)
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    assert_eq!(t.run(again).await.run.status, RunStatus::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_its_timeout_is_a_timeout_error_matched_by_type() {
    let t = TestDb::new().await;
    let started = std::time::Instant::now();
    let view = run_failing(&t, Failure::Sleep).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the body was cut off"
    );
    assert_eq!(view.run.status, RunStatus::Cancelled, "matching(Timeout)");
    assert_eq!(steps(&view), ["fail#1 failed/cancelled"]);
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Timeout")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("step ran past its timeout of 50ms")
    );
    // The stall horizon is the step's own timeout.
    assert_eq!(row.started_at, Some(t0()));
    assert_eq!(row.stall_at, Some(at_ms(50)));
}

#[derive(Debug, thiserror::Error)]
#[error("error A")]
struct ErrA;

#[derive(Debug, thiserror::Error)]
#[error("error B")]
struct ErrB;

#[derive(Debug, thiserror::Error)]
#[error("error C")]
struct ErrC;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Which {
    A,
    B,
    C,
}

fn raise(which: Which) -> StepError {
    match which {
        Which::A => ErrA.into(),
        Which::B => ErrB.into(),
        Which::C => ErrC.into(),
    }
}

/// Blanket `skip` written first, typed `cancel` for A and C below it, and a step
/// policy for C.
struct Ordered;

#[workflow(name = "policy.ordered", input = Which, on_exception(action = "skip"))]
#[on_exception(matching(ErrA, ErrC), action = "cancel")]
impl Ordered {
    #[step(on_exception(matching(ErrC), action = "pause"))]
    async fn first(&self, cx: &mut StepCx<Which>) -> Result<(), StepError> {
        Err(raise(*cx.input()))
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Which>) {}
}

/// No policies at all.
struct Unguarded;

#[workflow(name = "policy.unguarded", input = Which)]
impl Unguarded {
    #[step]
    async fn first(&self, cx: &mut StepCx<Which>) -> Result<(), StepError> {
        Err(raise(*cx.input()))
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Which>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_resolve_step_then_workflow_typed_then_blanket_then_pause() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(Ordered)
            .register(Unguarded)
            .build()
            .expect("worker");
    let cases = [
        // The step's policy wins over the workflow's typed one.
        (
            client
                .start::<Ordered>(&Which::C)
                .await
                .expect("start")
                .run_id,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
        ),
        // The typed workflow policy wins over the blanket one written before it.
        (
            client
                .start::<Ordered>(&Which::A)
                .await
                .expect("start")
                .run_id,
            RunStatus::Cancelled,
            vec!["first#1 failed/cancelled"],
        ),
        // Nothing typed matches: the blanket one.
        (
            client
                .start::<Ordered>(&Which::B)
                .await
                .expect("start")
                .run_id,
            RunStatus::Finished,
            vec!["first#1 failed/skipped", "second#1 completed/completed"],
        ),
        // No policy: pause.
        (
            client
                .start::<Unguarded>(&Which::A)
                .await
                .expect("start")
                .run_id,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
        ),
    ];
    worker.run_until_idle().await.expect("run");
    for (run_id, status, rows) in cases {
        let view = t.run(run_id).await;
        assert_eq!(view.run.status, status, "{run_id}");
        assert_eq!(steps(&view), rows, "{run_id}");
        let paused = status == RunStatus::Paused;
        assert_eq!(
            view.error_class.is_some(),
            paused,
            "{run_id}: error columns only on a pause"
        );
    }
}

struct Flaky {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "policy.flaky")]
impl Flaky {
    #[step(on_exception(
        matching(ErrA),
        action = "reattempt",
        wait = "1s",
        max_reattempts = 2,
        terminal_action = "cancel"
    ))]
    async fn flaky(&self, _cx: &mut StepCx<()>) -> Result<(), ErrA> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ErrA)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_reattempts_runs_the_body_n_plus_one_times_then_the_terminal_action() {
    let t = TestDb::new().await;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(Flaky {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    let run_id = t.client().start::<Flaky>(&()).await.expect("start").run_id;

    for attempt in 1..=3_i64 {
        assert_eq!(worker.run_until_idle().await.expect("run"), 1);
        assert_eq!(worker.run_until_idle().await.expect("run"), 0, "waits 1 s");
        let view = t.run(run_id).await;
        if attempt < 3 {
            let next = step(&view, "flaky", i32::try_from(attempt + 1).expect("small"));
            assert_eq!(next.status, StepStatus::Scheduled);
            assert_eq!(next.scheduled_at, at_ms(attempt * 1_000));
        }
        t.clock.advance(Duration::from_secs(1));
    }
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "max_reattempts = 2: 3 runs"
    );

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Cancelled, "terminal_action");
    assert_eq!(
        steps(&view),
        [
            "flaky#1 failed/reattempted",
            "flaky#2 failed/reattempted",
            "flaky#3 failed/cancelled"
        ]
    );
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:flaky#1",
            "step_failed:flaky#1",
            "step_reattempted:flaky#1",
            "step_started:flaky#2",
            "step_failed:flaky#2",
            "step_reattempted:flaky#2",
            "step_started:flaky#3",
            "step_failed:flaky#3",
            "cancelled:flaky#3"
        ]
    );
    assert_eq!(
        view.events.last().and_then(|e| e.reason.as_deref()),
        Some("step failed after 3 attempts in a row: error A")
    );
    for s in &view.steps {
        assert_eq!(s.error_class.as_deref(), Some(type_name::<ErrA>()));
    }
}

#[derive(Debug, thiserror::Error)]
#[error("reported always")]
struct Always;

#[derive(Debug, thiserror::Error)]
#[error("reported never")]
struct Never;

#[derive(Debug, thiserror::Error)]
#[error("reported at the end")]
struct TerminalOnly;

#[derive(Debug, thiserror::Error)]
#[error("skipped, reported at the end")]
struct SkippedTerminalOnly;

#[derive(Debug, thiserror::Error)]
#[error("no policy")]
struct Unmatched;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Mode {
    Always,
    Never,
    TerminalOnly,
    SkippedTerminalOnly,
    Unmatched,
}

struct Reporting;

#[workflow(name = "policy.reporting", input = Mode)]
impl Reporting {
    #[step(
        on_exception(
            matching(Always),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "always"
        ),
        on_exception(
            matching(Never),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "never"
        ),
        on_exception(
            matching(TerminalOnly),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "terminal_only"
        ),
        on_exception(
            matching(SkippedTerminalOnly),
            action = "skip",
            report = "terminal_only"
        )
    )]
    async fn fail(&self, cx: &mut StepCx<Mode>) -> Result<(), StepError> {
        Err(match cx.input() {
            Mode::Always => Always.into(),
            Mode::Never => Never.into(),
            Mode::TerminalOnly => TerminalOnly.into(),
            Mode::SkippedTerminalOnly => SkippedTerminalOnly.into(),
            Mode::Unmatched => Unmatched.into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_decides_which_errors_reach_the_error_hook() {
    let t = TestDb::new().await;
    let reports: Arc<Mutex<Vec<ErrorReport>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let worker =
        t.db.worker()
            .register(Reporting)
            .on_error(move |report| sink.lock().expect("not poisoned").push(report.clone()))
            .build()
            .expect("worker");
    let client = t.client();
    let mut runs: HashMap<RunId, Mode> = HashMap::new();
    for mode in [
        Mode::Always,
        Mode::Never,
        Mode::TerminalOnly,
        Mode::SkippedTerminalOnly,
        Mode::Unmatched,
    ] {
        runs.insert(
            client
                .start::<Reporting>(&mode)
                .await
                .expect("start")
                .run_id,
            mode,
        );
    }
    worker.run_until_idle().await.expect("run");

    let reports = reports.lock().expect("not poisoned").clone();
    let for_mode = |mode: Mode| -> Vec<(i32, String)> {
        reports
            .iter()
            .filter(|r| runs[&r.run_id] == mode)
            .map(|r| (r.attempt, r.verb.clone()))
            .collect()
    };
    let reattempt = "Reattempt { wait_ms: 0 }".to_owned();
    assert_eq!(
        for_mode(Mode::Always),
        [
            (1, reattempt.clone()),
            (2, reattempt),
            (
                3,
                "Pause { reason: \"step failed after 3 attempts in a row: reported always\" }"
                    .to_owned()
            )
        ]
    );
    assert_eq!(for_mode(Mode::Never), []);
    let terminal = for_mode(Mode::TerminalOnly);
    assert_eq!(terminal.len(), 1, "{terminal:?}");
    assert_eq!(terminal[0].0, 3);
    assert!(terminal[0].1.starts_with("Pause"), "{terminal:?}");
    let skipped = for_mode(Mode::SkippedTerminalOnly);
    assert_eq!(skipped.len(), 1, "a non-reattempt action is terminal");
    assert!(skipped[0].1.starts_with("Skip"), "{skipped:?}");
    assert_eq!(
        for_mode(Mode::Unmatched).len(),
        1,
        "the default pause reports"
    );

    for report in &reports {
        assert_eq!(report.workflow, "policy.reporting");
        assert_eq!(report.step, "fail");
        let mode = runs[&report.run_id];
        let expected = match mode {
            Mode::Always => type_name::<Always>(),
            Mode::Never => type_name::<Never>(),
            Mode::TerminalOnly => type_name::<TerminalOnly>(),
            Mode::SkippedTerminalOnly => type_name::<SkippedTerminalOnly>(),
            Mode::Unmatched => type_name::<Unmatched>(),
        };
        assert_eq!(report.class, expected);
    }

    // The rows keep every error, reported or not.
    for (run_id, mode) in &runs {
        let view = t.run(*run_id).await;
        assert!(
            view.steps.iter().all(|s| s.error_class.is_some()),
            "{mode:?}"
        );
        let attempts = view.steps.len();
        let expected = match mode {
            Mode::Always | Mode::Never | Mode::TerminalOnly => 3,
            Mode::SkippedTerminalOnly | Mode::Unmatched => 1,
        };
        assert_eq!(attempts, expected, "{mode:?}");
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the body failed")]
struct BodyFailed;

#[derive(Debug, thiserror::Error)]
#[error("the handler failed")]
struct HandlerFailed;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Answer {
    Skip,
    Reattempt,
    Nothing,
    Fails,
}

struct Handled {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "policy.handled", input = Answer)]
#[on_exception(handler = triage)]
impl Handled {
    fn triage(
        &self,
        cx: &StepCx<Answer>,
        error: &StepError,
    ) -> Result<Option<Flow>, HandlerFailed> {
        assert!(error.is::<BodyFailed>());
        match cx.input() {
            Answer::Skip => Ok(Some(Flow::skip("handled: skip"))),
            Answer::Reattempt if cx.attempt() == 1 => Ok(Some(Flow::reattempt(Duration::ZERO))),
            Answer::Reattempt => Ok(Some(Flow::cancel("handled: enough"))),
            Answer::Nothing => Ok(None),
            Answer::Fails => Err(HandlerFailed),
        }
    }

    #[step]
    async fn first(&self, _cx: &mut StepCx<Answer>) -> Result<(), BodyFailed> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(BodyFailed)
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Answer>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_answers_with_a_verb_and_no_answer_or_its_failure_pauses() {
    let t = TestDb::new().await;
    let calls = Arc::new(AtomicU32::new(0));
    let reports: Arc<Mutex<Vec<ErrorReport>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let worker =
        t.db.worker()
            .register(Handled {
                calls: Arc::clone(&calls),
            })
            .on_error(move |report| sink.lock().expect("not poisoned").push(report.clone()))
            .build()
            .expect("worker");
    let client = t.client();
    let cases = [
        (
            Answer::Skip,
            RunStatus::Finished,
            vec!["first#1 failed/skipped", "second#1 completed/completed"],
            ("step_skipped", "handled: skip"),
        ),
        (
            Answer::Reattempt,
            RunStatus::Cancelled,
            vec!["first#1 failed/reattempted", "first#2 failed/cancelled"],
            ("cancelled", "handled: enough"),
        ),
        (
            Answer::Nothing,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            (
                "paused",
                "handler `triage` gave no verb for: the body failed",
            ),
        ),
        (
            Answer::Fails,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            ("paused", "handler `triage` failed: the handler failed"),
        ),
    ];
    let mut started = Vec::new();
    for (answer, ..) in &cases {
        started.push(client.start::<Handled>(answer).await.expect("start").run_id);
    }
    worker.run_until_idle().await.expect("run");

    for ((answer, status, rows, (event, reason)), run_id) in cases.iter().zip(&started) {
        let view = t.run(*run_id).await;
        assert_eq!(view.run.status, *status, "{answer:?}");
        assert_eq!(steps(&view), *rows, "{answer:?}");
        let found = view
            .events
            .iter()
            .find(|e| e.event == *event)
            .unwrap_or_else(|| panic!("{answer:?}: no {event} in {:?}", events(&view)));
        assert_eq!(found.reason.as_deref(), Some(*reason), "{answer:?}");
        if *status == RunStatus::Paused {
            // The run keeps the step's error, not the handler's.
            assert_eq!(
                view.error_class.as_deref(),
                Some(type_name::<BodyFailed>()),
                "{answer:?}"
            );
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let reported = reports.lock().expect("not poisoned").clone();
    assert_eq!(
        reported.len(),
        6,
        "report = always: every handled error, plus the failing handler's own error"
    );
    assert!(
        reported.iter().any(|r| r.message == "the handler failed"),
        "the handler's own error is reported: {reported:?}"
    );
}

#[derive(Debug, thiserror::Error)]
#[error("the skip guard failed")]
struct SkipGuardFailed;

#[derive(Debug, thiserror::Error)]
#[error("the cancel guard failed")]
struct CancelGuardFailed;

/// Which guard says what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Guards {
    Cancel,
    CancelFails,
    Skip,
    SkipFails,
    Neither,
}

struct Guarded {
    calls: Arc<Mutex<Vec<&'static str>>>,
}

impl Guarded {
    fn record(&self, call: &'static str) {
        self.calls.lock().expect("not poisoned").push(call);
    }
}

#[workflow(name = "policy.guarded", input = Guards, cancel_if = should_cancel)]
impl Guarded {
    fn should_cancel(&self, cx: &StepCx<Guards>) -> Result<bool, CancelGuardFailed> {
        match cx.input() {
            Guards::CancelFails => Err(CancelGuardFailed),
            guards => Ok(*guards == Guards::Cancel),
        }
    }

    fn should_skip(&self, cx: &StepCx<Guards>) -> Result<bool, SkipGuardFailed> {
        match cx.input() {
            Guards::SkipFails => Err(SkipGuardFailed),
            guards => Ok(*guards == Guards::Skip),
        }
    }

    #[step(skip_if = should_skip, on_exception(matching(SkipGuardFailed), action = "cancel"))]
    async fn first(&self, _cx: &mut StepCx<Guards>) {
        self.record("first");
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Guards>) {
        self.record("second");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one table of every guard outcome reads best in one place
async fn guards_cancel_or_skip_before_the_body_and_their_errors_go_to_the_policies() {
    let cases = [
        (
            Guards::Cancel,
            RunStatus::Cancelled,
            vec!["first#1 cancelled/cancelled"],
            vec!["started", "step_started:first#1", "cancelled:first#1"],
            Some("cancel_if `should_cancel` is true"),
            vec![],
            None,
        ),
        (
            Guards::Skip,
            RunStatus::Finished,
            vec!["first#1 skipped/skipped", "second#1 completed/completed"],
            vec![
                "started",
                "step_started:first#1",
                "step_skipped:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            Some("skip_if `should_skip` is true"),
            vec!["second"],
            None,
        ),
        // skip_if fails: the step's policy for its error cancels.
        (
            Guards::SkipFails,
            RunStatus::Cancelled,
            vec!["first#1 failed/cancelled"],
            vec![
                "started",
                "step_started:first#1",
                "step_failed:first#1",
                "cancelled:first#1",
            ],
            Some("step failed: the skip guard failed"),
            vec![],
            Some(type_name::<SkipGuardFailed>()),
        ),
        // cancel_if fails: no policy matches, the default pauses.
        (
            Guards::CancelFails,
            RunStatus::Paused,
            vec!["first#1 failed/paused"],
            vec![
                "started",
                "step_started:first#1",
                "step_failed:first#1",
                "paused",
            ],
            Some("step failed: the cancel guard failed"),
            vec![],
            Some(type_name::<CancelGuardFailed>()),
        ),
        (
            Guards::Neither,
            RunStatus::Finished,
            vec![
                "first#1 completed/completed",
                "second#1 completed/completed",
            ],
            vec![
                "started",
                "step_started:first#1",
                "step_completed:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            None,
            vec!["first", "second"],
            None,
        ),
    ];
    let t = TestDb::new().await;
    for (guards, status, rows, trail, reason, bodies, error_class) in cases {
        let calls: Arc<Mutex<Vec<&'static str>>> = Arc::default();
        let worker =
            t.db.worker()
                .register(Guarded {
                    calls: Arc::clone(&calls),
                })
                .build()
                .expect("worker");
        let run_id = t
            .client()
            .start::<Guarded>(&guards)
            .await
            .expect("start")
            .run_id;
        worker.run_until_idle().await.expect("run");

        let view = t.run(run_id).await;
        assert_eq!(view.run.status, status, "{guards:?}");
        assert_eq!(steps(&view), rows, "{guards:?}");
        assert_eq!(events(&view), trail, "{guards:?}");
        if let Some(reason) = reason {
            assert!(
                view.events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some(reason)),
                "{guards:?}: {:?}",
                view.events
            );
        }
        assert_eq!(*calls.lock().expect("not poisoned"), bodies, "{guards:?}");
        assert_eq!(
            step(&view, "first", 1).error_class.as_deref(),
            error_class,
            "{guards:?}"
        );
    }
}

/// Where a step puts a NUL character, which Postgres `text` and `jsonb` refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum NulIn {
    ErrorMessage,
    Reason,
    Output,
    IgnoredOutput,
}

struct Nuls;

#[workflow(name = "policy.nuls", input = NulIn)]
impl Nuls {
    #[step]
    async fn only(&self, cx: &mut StepCx<NulIn>) -> StepResult {
        match cx.input() {
            NulIn::ErrorMessage => Err(StepError::msg("bad\0byte")),
            NulIn::Reason => Ok(Flow::pause("why\0not")),
            NulIn::Output => {
                cx.output(&serde_json::json!({ "key\0": "value" }))?;
                Ok(Flow::Complete)
            }
            NulIn::IgnoredOutput => {
                let refused = cx.output(&vec!["a\0b"]).is_err();
                cx.output(&serde_json::json!({ "refused": refused }))?;
                Ok(Flow::Complete)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_from_a_step_never_makes_its_outcome_unrecordable() {
    let t = TestDb::new().await;
    let worker = t.db.worker().register(Nuls).build().expect("worker");
    let client = t.client();
    let mut runs = Vec::new();
    for nul in [
        NulIn::ErrorMessage,
        NulIn::Reason,
        NulIn::Output,
        NulIn::IgnoredOutput,
    ] {
        runs.push((nul, client.start::<Nuls>(&nul).await.expect("start").run_id));
    }
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);

    for (nul, run_id) in runs {
        let view = t.run(run_id).await;
        let row = step(&view, "only", 1);
        let last_reason = view.events.last().and_then(|e| e.reason.as_deref());
        match nul {
            NulIn::ErrorMessage => {
                assert_eq!(steps(&view), ["only#1 failed/paused"]);
                assert_eq!(row.error_message.as_deref(), Some("bad\u{fffd}byte"));
                assert_eq!(view.error_message.as_deref(), Some("bad\u{fffd}byte"));
                assert_eq!(last_reason, Some("step failed: bad\u{fffd}byte"));
            }
            NulIn::Reason => {
                assert_eq!(steps(&view), ["only#1 completed/paused"]);
                assert_eq!(last_reason, Some("why\u{fffd}not"));
            }
            NulIn::Output => {
                // Refused by `cx.output`, so the body's `?` made it a step error.
                assert_eq!(steps(&view), ["only#1 failed/paused"]);
                assert_eq!(row.error_class.as_deref(), Some("serde_json::error::Error"));
                assert!(
                    row.error_message
                        .as_deref()
                        .is_some_and(|m| m.contains("NUL character")),
                    "{:?}",
                    row.error_message
                );
                assert_eq!(row.output, None);
            }
            NulIn::IgnoredOutput => {
                assert_eq!(steps(&view), ["only#1 completed/completed"]);
                assert_eq!(row.output, Some(serde_json::json!({ "refused": true })));
            }
        }
        assert_ne!(view.run.status, RunStatus::Performing, "{nul:?}");
    }
}
