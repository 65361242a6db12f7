//! Operator actions on Postgres: pause, resume, cancel and skip with their actor
//! and reason, the typed refusals, and the races with a running step.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Action, Error, IllegalMove, RunStatus, StepOutcome, StepStatus, Worker};
use tokio::sync::Notify;

use crate::pg::{TestDb, events, step, steps};

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
    /// Set when the body saw its context cancelled.
    told: std::sync::atomic::AtomicBool,
}

/// `first` holds until released when the input says so; `second` waits 10 s.
struct Three {
    gate: Arc<Gate>,
}

#[workflow(name = "ops.three", input = bool)]
impl Three {
    #[step]
    async fn first(&self, cx: &mut StepCx<bool>) -> StepResult {
        if *cx.input() {
            self.gate.entered.notify_one();
            tokio::select! {
                // Cancellation first: a body polled only after the test both
                // cancelled and released must still see the cancellation.
                biased;
                () = cx.cancelled() => self.gate.told.store(true, Ordering::SeqCst),
                () = self.gate.release.notified() => {}
            }
        }
        Ok(Flow::Complete)
    }

    #[step(wait = "10s")]
    async fn second(&self, _cx: &mut StepCx<bool>) {}

    #[step]
    async fn third(&self, _cx: &mut StepCx<bool>) {}
}

/// The last step holds until released.
struct Last {
    gate: Arc<Gate>,
}

#[workflow(name = "ops.last")]
impl Last {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
    }
}

#[derive(Debug, thiserror::Error)]
#[error("flaky")]
struct Flaky;

/// `flaky` fails until it has run `until` times; one reattempt, then pause.
struct Failing {
    runs: Arc<AtomicU32>,
    until: u32,
}

#[workflow(name = "ops.failing")]
impl Failing {
    #[step(on_exception(
        matching(Flaky),
        action = "reattempt",
        wait = "1s",
        max_reattempts = 1,
        terminal_action = "pause"
    ))]
    async fn flaky(&self, _cx: &mut StepCx<()>) -> Result<(), Flaky> {
        if self.runs.fetch_add(1, Ordering::SeqCst) + 1 < self.until {
            Err(Flaky)
        } else {
            Ok(())
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

/// `ask` pauses the run with the `Pause` verb.
struct Asks;

#[workflow(name = "ops.asks")]
impl Asks {
    #[step]
    async fn ask(&self, _cx: &mut StepCx<()>) -> StepResult {
        Ok(Flow::pause("needs a human"))
    }

    #[step(wait = "1m")]
    async fn answer(&self, _cx: &mut StepCx<()>) {}
}

fn worker(t: &TestDb, gate: &Arc<Gate>) -> Worker {
    t.db.worker()
        .notifications(false)
        .register(Three {
            gate: Arc::clone(gate),
        })
        .register(Last {
            gate: Arc::clone(gate),
        })
        .register(Asks)
        .build()
        .expect("worker")
}

fn illegal(result: Result<RunStatus, Error>) -> (Action, IllegalMove) {
    match result {
        Err(Error::IllegalMove { action, why, .. }) => (action, why),
        other => panic!("expected an illegal move, got {other:?}"),
    }
}

#[tokio::test]
async fn each_action_is_an_event_with_its_actor_and_reason() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Three>(&false).await.expect("start").run_id;

    assert_eq!(
        client
            .pause(run, "alice", "investigating")
            .await
            .expect("pause"),
        RunStatus::Paused
    );
    assert_eq!(
        w.run_until_idle().await.expect("run"),
        0,
        "a paused run is not claimed"
    );
    assert_eq!(
        client
            .resume(run, "bob", "all clear")
            .await
            .expect("resume"),
        RunStatus::Ready
    );
    assert_eq!(w.run_until_idle().await.expect("run"), 1);
    assert_eq!(
        client
            .cancel(run, "carol", "customer left")
            .await
            .expect("cancel"),
        RunStatus::Cancelled
    );

    let view = t.run(run).await;
    let actions: Vec<(&str, &str, Option<&str>)> = view
        .events
        .iter()
        .filter(|e| ["paused", "resumed", "cancelled"].contains(&e.event.as_str()))
        .map(|e| (e.event.as_str(), e.actor.as_str(), e.reason.as_deref()))
        .collect();
    assert_eq!(
        actions,
        [
            ("paused", "alice", Some("investigating")),
            ("resumed", "bob", Some("all clear")),
            ("cancelled", "carol", Some("customer left")),
        ]
    );
    assert!(view.paused_at.is_some() && view.cancelled_at.is_some());
    assert_eq!(
        steps(&view),
        [
            "first#1 completed/completed",
            "second#1 cancelled/cancelled"
        ],
        "the scheduled row was cancelled with the run"
    );
}

#[tokio::test]
async fn illegal_moves_are_typed_errors_and_change_nothing() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Three>(&false).await.expect("start").run_id;

    assert_eq!(
        illegal(client.resume(run, "ops", "r").await),
        (
            Action::Resume,
            IllegalMove::NotPaused {
                status: RunStatus::Ready
            }
        )
    );
    assert_eq!(
        illegal(client.skip(run, "ops", "r").await),
        (
            Action::Skip,
            IllegalMove::NotPaused {
                status: RunStatus::Ready
            }
        )
    );
    client.pause(run, "ops", "r").await.expect("pause");
    assert_eq!(
        illegal(client.pause(run, "ops", "again").await),
        (Action::Pause, IllegalMove::AlreadyPaused)
    );
    client.resume(run, "ops", "r").await.expect("resume");
    for _ in 0..3 {
        t.clock.advance(Duration::from_secs(10));
        w.run_until_idle().await.expect("run");
    }
    assert_eq!(t.run(run).await.run.status, RunStatus::Finished);
    let before = t.run(run).await.events.len();
    for action in [Action::Pause, Action::Resume, Action::Cancel, Action::Skip] {
        let result = match action {
            Action::Pause => client.pause(run, "ops", "r").await,
            Action::Resume => client.resume(run, "ops", "r").await,
            Action::Cancel => client.cancel(run, "ops", "r").await,
            Action::Skip => client.skip(run, "ops", "r").await,
        };
        assert_eq!(
            illegal(result),
            (
                action,
                IllegalMove::Ended {
                    status: RunStatus::Finished
                }
            )
        );
    }
    assert_eq!(
        t.run(run).await.events.len(),
        before,
        "no event for a refusal"
    );

    assert!(matches!(
        client.pause(RunId(i64::MAX), "ops", "r").await,
        Err(Error::RunNotFound { .. })
    ));
    for actor in ["", "  ", "a\u{0}b", &"x".repeat(256)] {
        assert!(
            matches!(
                client.pause(run, actor, "r").await,
                Err(Error::InvalidActor)
            ),
            "actor {actor:?}"
        );
    }
    // One reason rule for client, command and dashboard: some visible text,
    // at most 10,000 characters; refused before anything is read.
    let long = "y".repeat(10_001);
    for reason in ["", "   ", "\n\t", "\u{200b}\u{200b}", "\u{1b}", &long] {
        assert!(
            matches!(
                client.pause(run, "ops", reason).await,
                Err(Error::InvalidReason)
            ),
            "reason of {} characters",
            reason.chars().count()
        );
    }
    // A reason is stored as the rows keep text: NUL replaced.
    let other = client.start::<Three>(&false).await.expect("start").run_id;
    client
        .pause(other, "ops", &format!("a\u{0}b{}", "y".repeat(9_997)))
        .await
        .expect("pause");
    let reason = t
        .run(other)
        .await
        .events
        .last()
        .and_then(|e| e.reason.clone());
    let reason = reason.expect("a reason");
    assert!(reason.starts_with("a\u{fffd}b"));
    assert_eq!(reason.chars().count(), 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_during_a_step_holds_the_next_one_until_resume() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Three>(&true).await.expect("start").run_id;
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    gate.entered.notified().await;
    client.pause(run, "ops", "hold on").await.expect("pause");
    gate.release.notify_one();
    assert_eq!(running.await.expect("join"), 1);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused, "the pause wins");
    assert_eq!(
        steps(&view),
        ["first#1 completed/completed", "second#1 scheduled/-"],
        "the outcome is recorded and the next row scheduled"
    );
    t.clock.advance(Duration::from_secs(10));
    assert_eq!(
        w.run_until_idle().await.expect("run"),
        0,
        "held, not claimed"
    );

    client.resume(run, "ops", "go").await.expect("resume");
    w.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        events(&view)
            .iter()
            .filter(|e| e.starts_with("step_started"))
            .count(),
        3,
        "each step ran once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_during_the_last_step_still_lets_the_run_finish() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Last>(&()).await.expect("start").run_id;
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    gate.entered.notified().await;
    client.pause(run, "ops", "too late").await.expect("pause");
    gate.release.notify_one();
    running.await.expect("join");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        illegal(client.resume(run, "ops", "r").await).1,
        IllegalMove::Ended {
            status: RunStatus::Finished
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_during_a_step_ignores_its_completion_and_tells_the_body() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Three>(&true).await.expect("start").run_id;
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    gate.entered.notified().await;
    client.cancel(run, "ops", "stop").await.expect("cancel");
    assert_eq!(
        steps(&t.run(run).await),
        ["first#1 cancelled/cancelled"],
        "the open row is cancelled at once"
    );

    // The worker learns at its heartbeat and tells the body.
    w.heartbeat().await.expect("heartbeat");
    gate.release.notify_one();
    assert_eq!(running.await.expect("join"), 1);
    assert!(
        gate.told.load(Ordering::SeqCst),
        "the body saw cx.cancelled()"
    );

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(
        steps(&view),
        ["first#1 cancelled/cancelled"],
        "no further step"
    );
    assert_eq!(
        events(&view).last().map(String::as_str),
        Some("late_completion_ignored:first#1")
    );
    t.clock.advance(Duration::from_mins(1));
    assert_eq!(w.run_until_idle().await.expect("run"), 0);
}

#[tokio::test]
async fn resume_after_an_error_pause_runs_a_new_attempt_with_reattempts_reset() {
    let t = TestDb::new().await;
    let runs = Arc::new(AtomicU32::new(0));
    let w =
        t.db.worker()
            .notifications(false)
            .register(Failing {
                runs: Arc::clone(&runs),
                until: 4,
            })
            .build()
            .expect("worker");
    let client = t.client();
    let run = client.start::<Failing>(&()).await.expect("start").run_id;
    w.run_until_idle().await.expect("run");
    t.clock.advance(Duration::from_secs(1));
    w.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert!(view.error_message.is_some());
    assert_eq!(
        steps(&view),
        ["flaky#1 failed/reattempted", "flaky#2 failed/paused"]
    );

    client
        .resume(run, "ops", "fixed the card processor")
        .await
        .expect("resume");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Ready);
    assert_eq!(view.error_message, None, "the error is cleared");
    assert_eq!(step(&view, "flaky", 3).status, StepStatus::Scheduled);
    assert_eq!(step(&view, "flaky", 3).scheduled_at, t.clock.now());

    // Attempt 3 fails again, but the resume reset the count: it is reattempted
    // (one allowed), not paused at once; attempt 4 succeeds.
    w.run_until_idle().await.expect("run");
    t.clock.advance(Duration::from_secs(1));
    w.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view)[2..],
        [
            "flaky#3 failed/reattempted",
            "flaky#4 completed/completed",
            "after#1 completed/completed"
        ]
    );
}

#[tokio::test]
async fn resume_after_a_pause_verb_schedules_the_next_step_after_its_wait() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Asks>(&()).await.expect("start").run_id;
    w.run_until_idle().await.expect("run");
    assert_eq!(t.run(run).await.run.status, RunStatus::Paused);
    assert_eq!(
        illegal(client.skip(run, "ops", "r").await).1,
        IllegalMove::NothingToSkip {
            step: "ask".to_owned()
        }
    );

    t.clock.advance(Duration::from_hours(1));
    client.resume(run, "ops", "answered").await.expect("resume");
    let view = t.run(run).await;
    let answer = step(&view, "answer", 1);
    assert_eq!(answer.status, StepStatus::Scheduled);
    assert_eq!(
        answer.scheduled_at,
        t.clock.now() + chrono::Duration::minutes(1),
        "the wait counts from the resume"
    );
    assert_eq!(view.run.current_step.as_deref(), Some("answer"));
    t.clock.advance(Duration::from_mins(1));
    w.run_until_idle().await.expect("run");
    assert_eq!(t.run(run).await.run.status, RunStatus::Finished);
}

#[tokio::test]
async fn skip_passes_over_a_failed_step_or_a_held_row() {
    let t = TestDb::new().await;
    let runs = Arc::new(AtomicU32::new(0));
    let w =
        t.db.worker()
            .notifications(false)
            .register(Failing {
                runs: Arc::clone(&runs),
                until: u32::MAX,
            })
            .register(Three {
                gate: Arc::default(),
            })
            .build()
            .expect("worker");
    let client = t.client();

    // A failed step: skipped, the next one runs.
    let failing = client.start::<Failing>(&()).await.expect("start").run_id;
    w.run_until_idle().await.expect("run");
    t.clock.advance(Duration::from_secs(1));
    w.run_until_idle().await.expect("run");
    assert_eq!(
        client
            .skip(failing, "ops", "not needed")
            .await
            .expect("skip"),
        RunStatus::Ready
    );
    w.run_until_idle().await.expect("run");
    let view = t.run(failing).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "flaky#1 failed/reattempted",
            "flaky#2 failed/paused",
            "after#1 completed/completed"
        ]
    );
    assert!(events(&view).contains(&"step_skipped:flaky#2".to_owned()));

    // A held row: marked skipped, the step after it scheduled with its wait.
    let three = client.start::<Three>(&false).await.expect("start").run_id;
    w.run_until_idle().await.expect("run");
    client.pause(three, "ops", "r").await.expect("pause");
    assert_eq!(
        client.skip(three, "ops", "r").await.expect("skip"),
        RunStatus::Ready
    );
    let view = t.run(three).await;
    assert_eq!(
        steps(&view),
        [
            "first#1 completed/completed",
            "second#1 skipped/skipped",
            "third#1 scheduled/-"
        ]
    );
    assert_eq!(step(&view, "second", 1).outcome, Some(StepOutcome::Skipped));
    w.run_until_idle().await.expect("run");
    assert_eq!(t.run(three).await.run.status, RunStatus::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_refuses_a_step_that_is_still_running() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate);
    let client = t.client();
    let run = client.start::<Three>(&true).await.expect("start").run_id;
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    gate.entered.notified().await;
    client.pause(run, "ops", "r").await.expect("pause");
    assert_eq!(
        illegal(client.skip(run, "ops", "r").await).1,
        IllegalMove::StepRunning {
            step: "first".to_owned()
        }
    );
    // Resuming while it runs lifts the pause: the outcome then advances the run.
    assert_eq!(
        client.resume(run, "ops", "r").await.expect("resume"),
        RunStatus::Performing
    );
    gate.release.notify_one();
    running.await.expect("join");
    assert_eq!(t.run(run).await.run.status, RunStatus::Ready);
}
