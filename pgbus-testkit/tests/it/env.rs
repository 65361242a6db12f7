//! The environment on its own: virtual time, faults, idempotency, listing.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, FailureAction, RunFilter, RunStatus, StallAction, StepOutcome};
use pgbus_testkit::{TestEnv, default_start};

#[derive(Debug, thiserror::Error)]
#[error("the supplier is down")]
struct SupplierDown;

pub(crate) struct Restock;

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
