//! The environment on its own: virtual time, faults, idempotency, listing.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, FailureAction, RunFilter, RunStatus, StallAction, StepOutcome};
use pgbus_testkit::{TestEnv, default_start};

#[derive(Debug, thiserror::Error)]
#[error("the supplier is down")]
struct SupplierDown;

struct Restock;

#[workflow(name = "stock.restock", input = u32)]
impl Restock {
    #[step]
    async fn order(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&(cx.input() * 10))?;
        Ok(Flow::Complete)
    }

    #[step(
        wait = "1h",
        on_exception(
            matching(SupplierDown),
            action = "reattempt",
            wait = "10m",
            max_reattempts = 3
        )
    )]
    async fn receive(&self, cx: &mut StepCx<u32>) -> StepResult {
        let ordered: Option<u32> = cx.output_of("order")?;
        cx.output(&ordered)?;
        Ok(Flow::Complete)
    }
}

#[tokio::test]
async fn an_hour_wait_and_ten_minute_reattempts_take_no_real_time() {
    let env = TestEnv::new().register(Restock);
    env.fail_step("stock.restock", "receive", 2, || {
        StepError::from(SupplierDown)
    });
    let run = env.start::<Restock>(&4).unwrap().run_id;

    let records = env.run_to_completion().await.expect("every run ends");

    let timeline: Vec<(&str, i32, StepOutcome, i64)> = records
        .iter()
        .map(|r| {
            (
                r.step.as_str(),
                r.attempt,
                r.outcome.unwrap(),
                (r.at - default_start()).num_minutes(),
            )
        })
        .collect();
    assert_eq!(
        timeline,
        [
            ("order", 1, StepOutcome::Completed, 0),
            ("receive", 1, StepOutcome::Reattempted, 60),
            ("receive", 2, StepOutcome::Reattempted, 70),
            ("receive", 3, StepOutcome::Completed, 80),
        ]
    );
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        view.steps.last().unwrap().output,
        Some(serde_json::json!(40))
    );
    assert_eq!((env.now() - default_start()).num_minutes(), 80);
}

#[tokio::test]
async fn nothing_runs_before_its_time() {
    let env = TestEnv::new().register(Restock);
    env.start::<Restock>(&1).unwrap();
    assert_eq!(env.run_until_idle().await.len(), 1);
    env.advance(Duration::from_secs(3_599));
    assert!(env.run_next().await.is_none(), "59m59s is not an hour");
    env.advance(Duration::from_secs(1));
    assert_eq!(
        env.run_next().await.map(|r| r.step),
        Some("receive".to_owned())
    );
}

#[tokio::test]
async fn faults_run_out_and_then_the_body_runs() {
    let env = TestEnv::new().register(Restock);
    env.fail_step("stock.restock", "order", 1, || StepError::msg("once"));
    let run = env.start::<Restock>(&2).unwrap().run_id;
    let first = env.run_next().await.unwrap();
    assert_eq!(
        first.outcome,
        Some(StepOutcome::Paused),
        "no policy on `order`: the default pauses"
    );
    assert_eq!(first.error.unwrap().message, "once");
    assert_eq!(env.run(run).unwrap().run.status, RunStatus::Paused);
}

#[tokio::test]
async fn idempotent_starts_and_listing() {
    let env = TestEnv::new().register(Restock);
    let first = env.start_idempotent::<Restock>(&1, "k").unwrap();
    let again = env.start_idempotent::<Restock>(&2, "k").unwrap();
    assert!(first.created && !again.created);
    assert_eq!(first.run_id, again.run_id);
    assert!(matches!(
        env.start_idempotent::<Restock>(&1, "  "),
        Err(Error::BlankIdempotencyKey)
    ));
    let other = env.start::<Restock>(&3).unwrap().run_id;

    let all = env.list_runs(&RunFilter::default()).expect("list");
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        [other, first.run_id],
        "newest first"
    );
    let before = env
        .list_runs(&RunFilter::new().before(other))
        .expect("list");
    assert_eq!(before.len(), 1);
    assert!(matches!(
        env.run(RunId(999)),
        Err(Error::RunNotFound { .. })
    ));
}

struct Guarded;

#[workflow(name = "stock.guarded", input = bool)]
impl Guarded {
    fn skip(&self, cx: &StepCx<bool>) -> bool {
        *cx.input()
    }

    #[step(skip_if = skip)]
    async fn wrap(&self, _cx: &mut StepCx<bool>) {}
}

#[tokio::test]
async fn a_fault_is_not_used_up_by_an_attempt_a_guard_stopped() {
    let env = TestEnv::new().register(Guarded);
    env.fail_step("stock.guarded", "wrap", 1, || StepError::msg("injected"));
    env.start::<Guarded>(&true).unwrap();
    let skipped = env.run_next().await.unwrap();
    assert_eq!(skipped.outcome, Some(StepOutcome::Skipped));
    assert!(skipped.error.is_none());
    env.start::<Guarded>(&false).unwrap();
    let failed = env.run_next().await.unwrap();
    assert_eq!(
        failed.error.unwrap().message,
        "injected",
        "the fault waited for a body"
    );
}

#[tokio::test]
async fn idempotency_keys_are_short_visible_text() {
    let env = TestEnv::new().register(Restock);
    let long = "k".repeat(256);
    assert!(matches!(
        env.start_idempotent::<Restock>(&1, &long),
        Err(Error::InvalidIdempotencyKey)
    ));
    assert!(matches!(
        env.start_idempotent::<Restock>(&1, "a\0b"),
        Err(Error::InvalidIdempotencyKey)
    ));
    assert!(
        env.start_idempotent::<Restock>(&1, &"é".repeat(255))
            .is_ok(),
        "255 characters, not bytes"
    );
    assert!(
        env.list_runs(&RunFilter::default()).expect("list").len() == 1,
        "nothing started for a refused key"
    );
}

/// `watch` records whether its context was cancelled while it ran.
struct Watched {
    entered: std::sync::Arc<tokio::sync::Notify>,
    saw: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[workflow(name = "env.watched")]
impl Watched {
    #[step]
    async fn watch(&self, cx: &mut StepCx<()>) {
        self.entered.notify_one();
        cx.cancelled().await;
        self.saw
            .store(cx.is_cancelled(), std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_tells_the_running_body_at_once() {
    let entered = std::sync::Arc::new(tokio::sync::Notify::new());
    let saw = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let env = std::sync::Arc::new(TestEnv::new().register(Watched {
        entered: std::sync::Arc::clone(&entered),
        saw: std::sync::Arc::clone(&saw),
    }));
    let run = env.start::<Watched>(&()).expect("start").run_id;
    let running = tokio::spawn({
        let env = std::sync::Arc::clone(&env);
        async move { env.run_next().await }
    });
    entered.notified().await;
    assert_eq!(
        env.cancel(run, "ops", "stop").expect("cancel"),
        RunStatus::Cancelled
    );
    let record = running.await.expect("join").expect("an attempt");
    assert!(saw.load(std::sync::atomic::Ordering::SeqCst));
    assert!(record.late, "its completion was ignored");
    assert_eq!(env.run(run).expect("run").run.status, RunStatus::Cancelled);
}

#[tokio::test]
async fn a_crashed_step_waits_for_the_sweep_and_an_operator() {
    let env = TestEnv::new().register(Restock);
    let run = env.start::<Restock>(&1).expect("start").run_id;
    assert_eq!(env.crash_next(), Some(run));
    assert!(
        env.run_until_idle().await.is_empty(),
        "in progress elsewhere"
    );
    env.advance(Duration::from_secs(30));
    assert_eq!(env.sweep().repaired, 0, "30 s of silence is not yet lost");
    env.advance(Duration::from_millis(1));
    assert_eq!(env.sweep().repaired, 1);
    let view = env.run(run).expect("run");
    assert_eq!(
        view.run.status,
        RunStatus::Paused,
        "the default stall action"
    );
    assert!(matches!(env.resume(run, "", "r"), Err(Error::InvalidActor)));
    env.resume(run, "ops", "worker replaced").expect("resume");
    env.run_to_completion().await.expect("the run ends");
    let view = env.run(run).expect("run");
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        view.steps[1].attempt, 2,
        "a new attempt of the crashed step"
    );
}

/// `stuck`'s worker dies with every attempt, or hangs past its timeout:
/// the sweep cannot tell which.
struct Stuck;

#[workflow(name = "env.stuck")]
impl Stuck {
    #[step(timeout = "5s")]
    async fn stuck(&self, _cx: &mut StepCx<()>) {}
}

#[test]
fn a_step_that_stalls_every_time_ends_in_the_stall_actions_terminal_action() {
    let env = TestEnv::new()
        .stall_action(StallAction::Reattempt {
            wait: Duration::from_secs(10),
            max_reattempts: 2,
            terminal_action: FailureAction::Cancel,
        })
        .register(Stuck);
    let run = env.start::<Stuck>(&()).expect("start").run_id;
    for attempt in 1..=3 {
        assert_eq!(env.crash_next(), Some(run), "attempt {attempt} is claimed");
        env.advance(Duration::from_secs(5));
        assert_eq!(env.sweep().repaired, 1, "attempt {attempt} stalled");
        env.advance(Duration::from_secs(10));
    }
    assert_eq!(env.crash_next(), None, "no fourth attempt");

    let view = env.run(run).expect("run");
    assert_eq!(view.run.status, RunStatus::Cancelled);
    let outcomes: Vec<_> = view.steps.iter().map(|s| (s.attempt, s.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            (1, Some(StepOutcome::Reattempted)),
            (2, Some(StepOutcome::Reattempted)),
            (3, Some(StepOutcome::Cancelled)),
        ]
    );
    let events: Vec<String> = view
        .events
        .iter()
        .map(|e| match e.attempt {
            Some(attempt) => format!("{}#{attempt}", e.event),
            None => e.event.clone(),
        })
        .collect();
    let mut expected = vec!["started".to_owned()];
    for attempt in 1..=3 {
        expected.extend(
            ["step_started", "stall_detected", "step_failed"].map(|e| format!("{e}#{attempt}")),
        );
        if attempt < 3 {
            expected.push(format!("step_reattempted#{attempt}"));
        }
    }
    expected.push("cancelled#3".to_owned());
    assert_eq!(events, expected);
    assert_eq!(
        view.events.last().and_then(|e| e.reason.as_deref()),
        Some("step failed after 3 attempts in a row: attempt 3 of step `stuck` stalled (timeout)")
    );
}

#[test]
fn durations_past_any_date_are_cut_not_a_panic() {
    let env = TestEnv::new()
        .register(Restock)
        .retention(Some(Duration::MAX))
        .lost_worker_threshold(Duration::MAX);
    let run = env.start::<Restock>(&1).expect("start").run_id;
    assert_eq!(env.crash_next(), Some(run));
    env.advance(Duration::from_hours(24));
    assert_eq!(env.sweep().repaired, 1, "past the stall horizon, not lost");
    env.advance(Duration::MAX);
    assert_eq!(
        env.now(),
        chrono::DateTime::<chrono::Utc>::MAX_UTC,
        "the clock stops at its end"
    );
    assert_eq!(env.sweep().runs_deleted, 0, "a paused run is kept");
}

#[test]
fn actors_are_visible_text() {
    let env = TestEnv::new().register(Restock);
    let run = env.start::<Restock>(&1).expect("start").run_id;
    for actor in [
        "",
        " alice",
        "alice ",
        "\u{200b}",
        "a\u{202e}b",
        "\u{feff}ops",
        "a\tb",
    ] {
        assert!(
            matches!(env.pause(run, actor, "r"), Err(Error::InvalidActor)),
            "{actor:?}"
        );
    }
    for reason in ["", " \t ", &"y".repeat(10_001)] {
        assert!(
            matches!(env.pause(run, "ops", reason), Err(Error::InvalidReason)),
            "reason of {} characters",
            reason.chars().count()
        );
    }
    assert_eq!(
        env.pause(run, "Zoë (on call)", "r").expect("pause"),
        RunStatus::Paused
    );
}

struct Anything;

#[workflow(name = "env.anything", input = serde_json::Value)]
impl Anything {
    #[step]
    async fn only(&self, _cx: &mut StepCx<serde_json::Value>) {}
}

/// The testkit applies the store's input rule, so a test that passes in
/// memory does not fail on Postgres for an input it cannot hold.
#[test]
fn the_testkit_refuses_the_inputs_postgres_cannot_hold() {
    let env = TestEnv::new().register(Anything);
    let deep = (0..101).fold(serde_json::json!(0), |inner, _| serde_json::json!([inner]));
    let big = serde_json::json!("x".repeat(pgbus_runtime::context::MAX_INPUT_BYTES));
    for input in [deep, big, serde_json::json!("a\u{0}b")] {
        assert!(matches!(
            env.start::<Anything>(&input),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            env.start_idempotent::<Anything>(&input, "k"),
            Err(Error::InvalidInput { .. })
        ));
    }
    assert!(
        env.list_runs(&RunFilter::default())
            .expect("list")
            .is_empty()
    );
}

struct Spread;

/// Fans out one child per length, each child's input a string that long.
#[workflow(name = "env.spread", input = Vec<usize>)]
impl Spread {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<usize>>, fan: &mut FanOut) -> StepResult {
        for len in cx.input().clone() {
            fan.start::<Anything>(&serde_json::json!("z".repeat(len)))?;
        }
        Ok(Flow::Complete)
    }
}

/// `TestEnv::limits` sets the sizes as `DatabaseBuilder::limits` does, with
/// the same words, at every entry: a start, a signal, a fan-out child (whose
/// parent's attempt fails with the refusal, by its policy a pause).
#[tokio::test]
async fn input_and_payload_sizes_are_settings() {
    let env = TestEnv::new()
        .limits(
            pgbus_runtime::Limits::default()
                .input_bytes(64)
                .signal_payload_bytes(32),
        )
        .register(Anything)
        .register(Spread);
    match env.start::<Anything>(&serde_json::json!("x".repeat(70))) {
        Err(Error::InvalidInput { reason }) => {
            assert_eq!(reason, "an input is at most 64 bytes of JSON");
        }
        other => panic!("{other:?}"),
    }
    let run = env
        .start::<Anything>(&serde_json::json!("small"))
        .expect("small")
        .run_id;
    match env.signal(run, "s", &"y".repeat(40)) {
        Err(Error::InvalidSignal { reason }) => {
            assert_eq!(reason, "a signal payload is at most 32 bytes of JSON");
        }
        other => panic!("{other:?}"),
    }
    let parent = env
        .start::<Spread>(&vec![2, 70])
        .expect("the parent's own input is small")
        .run_id;
    env.run_until_idle().await;
    let view = env.run(parent).expect("the parent");
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.error_message.as_deref(),
        Some("invalid input: an input is at most 64 bytes of JSON")
    );
    assert_eq!(view.counts.batches, 0, "no child of the batch was started");
}

#[test]
fn starting_a_workflow_the_environment_has_not_registered_is_an_error() {
    let env = TestEnv::new();
    for started in [
        env.start::<Restock>(&1),
        env.start_idempotent::<Restock>(&1, "key"),
    ] {
        let error = started.expect_err("nothing here would run it");
        assert!(
            matches!(&error, Error::WorkflowNotRegistered { workflow } if workflow == "stock.restock"),
            "{error:?}"
        );
        assert!(error.to_string().contains("TestEnv::register"), "{error}");
    }
    let env = env.register(Restock);
    assert!(env.start::<Restock>(&1).is_ok());
}

/// A later version of `Restock` that added a step the environment's lacks.
struct RestockV2;

#[workflow(name = "stock.restock", input = u32)]
impl RestockV2 {
    #[step]
    async fn order(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn approve(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn receive(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_step_the_registered_definition_lacks_waits_then_pauses_after_the_grace() {
    use pgbus_runtime::store::Store as _;
    let env = TestEnv::new().register(Restock);
    // A run of the later version, as a client of it would start one.
    let (run, _) = env
        .store()
        .start_run(
            RestockV2::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let ran = env.run_until_idle().await;
    let names: Vec<&str> = ran.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(names, ["order"], "`approve` is not claimed");
    let view = env.run(run).expect("run");
    assert_eq!(view.run.status, RunStatus::Ready);
    let unrunnable = view.unrunnable.expect("the view says why");
    assert_eq!(
        (unrunnable.step_name.as_str(), unrunnable.missing),
        ("approve", pgbus_runtime::view::Missing::Step)
    );
    env.advance(Duration::from_secs(299));
    assert_eq!(env.sweep().undefined_paused, 0, "within the grace");
    env.advance(Duration::from_secs(2));
    assert_eq!(env.sweep().undefined_paused, 1);
    let view = env.run(run).expect("run");
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_runtime::error::StepNotDefined")
    );
}

struct Approve;

#[workflow(name = "env.approve", input = u32)]
impl Approve {
    #[step(wait_for = "manager.approved")]
    async fn approve(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&cx.signal().map(|s| s.payload.clone()))?;
        Ok(Flow::Complete)
    }
}

/// A mistyped signal, which would wait for ever, is refused as
/// `Client::signal` refuses it: with the likely name, nothing stored; the
/// run goes on with the right one; an unchecked one is stored.
#[tokio::test]
async fn a_mistyped_signal_is_refused_with_a_did_you_mean() {
    let env = TestEnv::new().register(Approve);
    let run = env.start::<Approve>(&1).expect("a start").run_id;
    env.run_until_idle().await;
    let error = env
        .signal(run, "manager.aproved", &true)
        .expect_err("no step waits for it");
    assert!(
        matches!(&error, Error::UnknownSignal { suggestion: Some(s), .. } if s == "manager.approved"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "no step of workflow `env.approve` waits for signal `manager.aproved`; did you mean \
         `manager.approved`? (its steps wait for `manager.approved`); nothing was sent to run \
         1. For a step a later version of the workflow will add, send it unchecked \
         (`Client::signal_unchecked`, `pgbus signal --unchecked`)"
    );
    assert!(env.run(run).expect("run").signals.is_empty());
    env.signal_unchecked(run, "manager.escalated", &true)
        .expect("stored unchecked");
    env.signal(run, "manager.approved", &true).expect("sent");
    env.run_to_completion().await.expect("completes");
    let view = env.run(run).expect("run");
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.signals.len(), 2);
}

/// Start options on the virtual clock (issue 20): a delayed start runs when
/// the clock gets there; a run on a queue of its own runs once the
/// environment claims from it; a bulk start gives each start its run.
#[tokio::test]
async fn start_options_and_bulk_starts_on_the_virtual_clock() {
    use pgbus_runtime::StartOptions;

    let env = TestEnv::new().register(Restock);
    let later = env
        .start_with::<Restock>(&1, &StartOptions::new().delay(Duration::from_mins(30)))
        .unwrap();
    let elsewhere = env
        .start_with::<Restock>(&2, &StartOptions::new().queue("bulk").priority(-1))
        .unwrap();
    assert!(env.run_until_idle().await.is_empty(), "neither is due here");
    env.advance(Duration::from_mins(30));
    let ran = env.run_next().await.expect("the delayed run's first step");
    assert_eq!((ran.run_id, ran.step.as_str()), (later.run_id, "order"));

    let env = env.queue("bulk");
    let records = env.run_to_completion().await.expect("every run ends");
    assert!(records.iter().any(|r| r.run_id == elsewhere.run_id));
    let view = env.run(elsewhere.run_id).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    assert!(
        view.steps
            .iter()
            .all(|s| (s.queue.as_str(), s.priority) == ("bulk", -1))
    );
    assert_eq!(
        (view.steps[1].scheduled_at - view.steps[0].finished_at.unwrap()).num_minutes(),
        60,
        "the second step's `wait` counts as always"
    );

    let started = env
        .start_many::<Restock>([
            (5, StartOptions::new().key("x")),
            (6, StartOptions::new()),
            (7, StartOptions::new().key("x")),
        ])
        .unwrap();
    assert_eq!(
        started.iter().map(|s| s.created).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(started[0].run_id, started[2].run_id);
    assert!(matches!(
        env.start_many::<Restock>([(8, StartOptions::new().queue(" "))]),
        Err(Error::StartRefused { index: 0, .. })
    ));
}
