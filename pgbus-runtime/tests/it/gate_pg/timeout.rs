//! Each `on_timeout` fires once, across a worker restart; a signal on the
//! deadline, or committed while the claim locks its run, wins over the passed
//! timeout.

use std::any::type_name;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, ErrorReport, RunStatus, StartOptions, WaitTimedOut, Worker};
use serde_json::json;

use super::{keep_signal, named, polling};
use crate::pg::{TestDb, at_ms, events, step, steps, t0};

/// `wait_for = "go"` with a 10 s timeout and each `on_timeout`.
pub(super) struct OnPause;

#[workflow(name = "gate.on_pause")]
impl OnPause {
    #[step(wait_for = "go", wait_timeout = "10s")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

struct OnCancel;

#[workflow(name = "gate.on_cancel")]
impl OnCancel {
    #[step(wait_for = "go", wait_timeout = "10s", on_timeout = "cancel")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

struct OnSkip;

#[workflow(name = "gate.on_skip")]
impl OnSkip {
    #[step(wait_for = "go", wait_timeout = "10s", on_timeout = "skip!")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

struct OnRun;

#[workflow(name = "gate.on_run")]
impl OnRun {
    #[step(wait_for = "go", wait_timeout = "10s", on_timeout = "run")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

fn timeout_worker(db: &Database, reports: &Arc<Mutex<Vec<ErrorReport>>>) -> Worker {
    let reports = Arc::clone(reports);
    polling(db)
        .register(OnPause)
        .register(OnCancel)
        .register(OnSkip)
        .register(OnRun)
        .on_error(move |r| reports.lock().unwrap().push(r.clone()))
        .build()
        .expect("worker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // four timeouts and a resume, one story
async fn each_on_timeout_fires_once_for_a_worker_started_after_the_wait_began() {
    let t = TestDb::new().await;
    let client = t.client();
    let reports = Arc::default();
    let first = timeout_worker(&t.db, &reports);
    let pause = client.start::<OnPause>(&()).await.expect("start").run_id;
    let cancel = client.start::<OnCancel>(&()).await.expect("start").run_id;
    let skip = client.start::<OnSkip>(&()).await.expect("start").run_id;
    let run = client.start::<OnRun>(&()).await.expect("start").run_id;
    assert_eq!(first.run_until_idle().await.expect("run"), 4);
    for id in [pause, cancel, skip, run] {
        let view = t.run(id).await;
        assert_eq!(steps(&view), ["wait#1 waiting/-"]);
        assert_eq!(view.steps[0].waiting_since, Some(t0()));
        assert_eq!(view.steps[0].scheduled_at, at_ms(10_000), "due at its end");
    }
    // The first worker goes away; the deadline lives in the rows.
    drop(first);

    let other_process = t.second_connection().await;
    let second = timeout_worker(&other_process, &reports);
    t.clock.advance(Duration::from_millis(9_999));
    assert_eq!(second.run_until_idle().await.expect("run"), 0, "not yet");
    t.clock.advance(Duration::from_millis(1));
    // pause 1, cancel 1, skip 1 + after, run 1 + after.
    assert_eq!(second.run_until_idle().await.expect("run"), 6);
    assert_eq!(second.run_until_idle().await.expect("run"), 0);
    let third_process = t.second_connection().await;
    let third = timeout_worker(&third_process, &reports);
    assert_eq!(third.run_until_idle().await.expect("run"), 0, "fired once");

    let message = "step `wait` waited 10s for signal `go`, which did not come";
    for id in [pause, cancel, skip, run] {
        let view = t.run(id).await;
        let timed_out = named(&view, "wait_timed_out");
        assert_eq!(timed_out.len(), 1, "{id:?}: {:?}", events(&view));
        assert_eq!(timed_out[0].step_id, Some(view.steps[0].id));
        assert_eq!(timed_out[0].actor, second.id());
        assert!(named(&view, "signal_consumed").is_empty());
        assert_eq!(view.steps[0].started_at, Some(at_ms(10_000)));
    }

    let view = t.run(pause).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["wait#1 failed/paused"]);
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<WaitTimedOut>())
    );
    assert_eq!(view.steps[0].error_message.as_deref(), Some(message));
    assert_eq!(
        view.error_class.as_deref(),
        Some(type_name::<WaitTimedOut>())
    );
    assert_eq!(named(&view, "paused")[0].reason.as_deref(), Some(message));

    let view = t.run(cancel).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(steps(&view), ["wait#1 failed/cancelled"]);
    assert_eq!(view.steps[0].error_message.as_deref(), Some(message));
    assert_eq!(
        events(&view).last().map(String::as_str),
        Some("cancelled:wait#1")
    );

    let view = t.run(skip).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 failed/skipped", "after#1 completed/completed"]
    );
    assert_eq!(view.steps[0].error_message.as_deref(), Some(message));

    // `run`: the body ran without a signal, and its own result counts.
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["wait#1 completed/completed", "after#1 completed/completed"]
    );
    assert_eq!(view.steps[0].output, Some(json!({"signal": null})));
    assert_eq!(view.steps[0].error_class, None);
    assert!(
        events(&view)
            .windows(2)
            .any(|w| w == ["wait_timed_out:wait#1", "step_completed:wait#1"]),
        "{:?}",
        events(&view)
    );
    assert!(
        reports.lock().unwrap().is_empty(),
        "a timeout is what the step asked for, not an error to report"
    );

    // Resuming the paused run waits again: a fresh attempt, from now.
    t.clock.advance(Duration::from_mins(1));
    let resumed_at = t.clock.now();
    client
        .resume(pause, "ops", "the signal is on its way")
        .await
        .expect("resume");
    assert_eq!(second.run_until_idle().await.expect("run"), 1);
    let view = t.run(pause).await;
    assert_eq!(steps(&view), ["wait#1 failed/paused", "wait#2 waiting/-"]);
    let again = step(&view, "wait", 2);
    assert_eq!(again.waiting_since, Some(resumed_at));
    assert_eq!(again.scheduled_at, at_ms(80_000));
    client.signal(pause, "go", "at last").await.expect("signal");
    assert_eq!(second.run_until_idle().await.expect("run"), 2);
    let view = t.run(pause).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        step(&view, "wait", 2).output,
        Some(json!({"signal": "at last"}))
    );
    assert_eq!(view.signals[0].consumed_by, Some(again.id));
    assert_eq!(named(&view, "wait_timed_out").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_on_the_deadline_before_the_claim_wins() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(OnPause).build().expect("worker");
    let on_the_dot = client.start::<OnPause>(&()).await.expect("start").run_id;
    let after_it = client.start::<OnPause>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    t.clock.advance(Duration::from_secs(10));
    client
        .signal(on_the_dot, "go", "on the dot")
        .await
        .expect("signal");
    // Past the deadline, but no claim has decided yet: still the signal.
    t.clock.advance(Duration::from_millis(1));
    client
        .signal(after_it, "go", "just late")
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);

    for (id, payload) in [(on_the_dot, "on the dot"), (after_it, "just late")] {
        let view = t.run(id).await;
        assert_eq!(view.run.status, RunStatus::Finished, "{payload}");
        assert_eq!(
            steps(&view),
            ["wait#1 completed/completed", "after#1 completed/completed"]
        );
        assert_eq!(view.steps[0].output, Some(json!({"signal": payload})));
        assert_eq!(view.signals[0].consumed_by, Some(view.steps[0].id));
        assert_eq!(named(&view, "signal_consumed").len(), 1);
        assert!(named(&view, "wait_timed_out").is_empty(), "{payload}");
    }
}

const BOUNDARY_RUNS: usize = 200;
const BOUNDARY_ROUNDS: usize = 5;

/// The deadline passed while the rows waited; signals are sent while a worker
/// claims them. A signal committed before the claim locked its run (its
/// `signal_received` comes before the deciding `step_started`) must win: the
/// claim statement's snapshot predates its locks, so the gate reads signals in a
/// later statement (`gate_inputs.sql`). Reading them in the claim statement lost
/// about 4 of 1,000 such races to the timeout (found in review).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signal_committed_while_the_claim_locks_its_run_beats_a_passed_timeout() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db)
        .register(OnPause)
        .concurrency(8)
        .build()
        .expect("worker");
    let mut raced = 0;
    for _ in 0..BOUNDARY_ROUNDS {
        let runs: Vec<RunId> = client
            .start_many::<OnPause>((0..BOUNDARY_RUNS).map(|_| ((), StartOptions::new())))
            .await
            .expect("start")
            .iter()
            .map(|s| s.run_id)
            .collect();
        worker.run_until_idle().await.expect("park them all");
        t.clock.advance(Duration::from_secs(10));

        let sender = {
            let client = client.clone();
            let runs = runs.clone();
            tokio::spawn(async move {
                for run in runs {
                    // A run whose timeout won meanwhile may be paused: still
                    // taken. None is ended, so every send succeeds.
                    client
                        .signal(run, "go", &json!("late"))
                        .await
                        .expect("send");
                }
            })
        };
        worker
            .run_until_idle()
            .await
            .expect("claims racing the sends");
        sender.await.expect("sender");

        for run in runs {
            let view = t.run(run).await;
            let received = named(&view, "signal_received").first().map(|e| e.id);
            let deciding_start = view
                .events
                .iter()
                .filter(|e| e.event == "step_started" && e.step_name.as_deref() == Some("wait"))
                .map(|e| e.id)
                .max();
            let timed_out = !named(&view, "wait_timed_out").is_empty();
            if let (Some(received), Some(started)) = (received, deciding_start)
                && received < started
            {
                raced += 1;
                assert!(
                    !timed_out,
                    "run {run}: the signal came before the claim and the timeout won: {:?}",
                    events(&view)
                );
            }
        }
    }
    assert!(
        raced > 0,
        "no signal landed before a claim: the race was not run"
    );
}
