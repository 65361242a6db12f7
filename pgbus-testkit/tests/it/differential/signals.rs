//! Signals: stored or refused, before and after the wait, timeouts and operators around a wait.

use super::*;

/// Signals to a paused run, an ended one, a missing one, and bad ones.
async fn stored_or_refused<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let open = h.start::<Verbs>(&script("pause")).await;
    let done = h.start::<Verbs>(&script("finish")).await;
    h.run_until_idle().await;
    // No step of `Verbs` waits for it: refused checked, stored unchecked.
    let unknown = h
        .signal(open, "payment.settled", &serde_json::json!({"amount": 12}))
        .await;
    assert!(
        unknown
            .as_ref()
            .is_err_and(|e| e.contains("waits for signal `payment.settled`")),
        "{unknown:?}"
    );
    let sent = h
        .signal_unchecked(open, "payment.settled", &serde_json::json!({"amount": 12}))
        .await;
    assert_eq!(
        sent,
        Ok(pgbus_runtime::SignalId(1)),
        "a paused run keeps it"
    );
    let refused = h.signal(done, "payment.settled", &1).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("has ended (finished)")),
        "{refused:?}"
    );
    let missing = h.signal(RunId(999_999), "x", &1).await;
    assert!(missing.is_err_and(|e| e.contains("does not exist")));
    for (name, payload) in [
        ("", serde_json::json!(1)),
        (" padded", serde_json::json!(1)),
        ("ok", serde_json::json!({"a": "nul\u{0}"})),
    ] {
        let bad = h.signal(open, name, &payload).await;
        assert!(
            bad.is_err_and(|e| e.starts_with("invalid signal")),
            "{name:?}"
        );
    }
    vec![open, done]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_are_stored_or_refused_the_same_way() {
    both!(|h| h.register(Verbs), stored_or_refused());
}

/// Holds the `matches` predicate open once, after it is armed, so that a test can
/// send a signal between a claim and its park.
#[derive(Default)]
pub(super) struct Hold {
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
pub(super) struct Approvals {
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

pub(super) fn approvals() -> Approvals {
    Approvals {
        hold: Arc::new(Hold::default()),
    }
}

/// A `wait_for = "go"` step with a 10-minute `wait_timeout` and the given
/// `on_timeout`, then `after`.
macro_rules! timeout_workflow {
    ($ty:ident, $name:literal, $on_timeout:literal) => {
        pub(super) struct $ty;

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

pub(super) fn event_names(projection: &Projection) -> Vec<&str> {
    projection.events.iter().map(|e| e.0.as_str()).collect()
}

/// A signal before the wait, one after it, and some the predicate turns down.
async fn before_and_after_the_wait<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    // Sent while `prepare` is still scheduled: `approve` takes it without parking.
    let early = h.start::<Approvals>(&1).await;
    h.signal(early, "approval", &serde_json::json!({"n": 1}))
        .await
        .expect("sent");
    // Parked first, then woken by the signal.
    let woken = h.start::<Approvals>(&2).await;
    // The predicate turns two down (they stay unconsumed), then accepts one.
    let picky = h.start::<Approvals>(&3).await;
    h.run_until_idle().await;
    h.signal(woken, "approval", &serde_json::json!({"n": 2}))
        .await
        .expect("sent");
    h.signal_unchecked(picky, "other.name", &serde_json::json!({"ok": true}))
        .await
        .expect("sent");
    h.run_until_idle().await;
    for n in [1, 2] {
        h.signal(picky, "approval", &serde_json::json!({"ok": false, "n": n}))
            .await
            .expect("sent");
        h.run_until_idle().await;
    }
    h.advance(Duration::from_secs(5));
    h.signal(picky, "approval", &serde_json::json!({"ok": true}))
        .await
        .expect("sent");
    drive(h).await;
    vec![early, woken, picky]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_before_and_after_the_wait_and_the_predicate_agree() {
    let projections = both!(|h| h.register(approvals()), before_and_after_the_wait());

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

/// A second signal comes while the gate's predicate holds the first.
async fn between_claim_and_park<R: Rig>(h: &Harness<R>, hold: &Hold) -> Vec<RunId> {
    let run = h.start::<Approvals>(&1).await;
    h.run_until_idle().await; // parks
    h.signal(run, "approval", &serde_json::json!({"ok": false}))
        .await
        .expect("sent");
    hold.arm();
    let running = h.spawn_next();
    hold.entered.notified().await;
    // The gate holds the first signal in its predicate: the row is in
    // progress, so this one finds nothing waiting to wake.
    h.signal(run, "approval", &serde_json::json!({"ok": true}))
        .await
        .expect("sent");
    hold.release();
    running.await.expect("join");
    let view = h.view(run).await;
    assert_eq!(
        view.steps[1].status,
        StepStatus::Scheduled,
        "parked and woken at once"
    );
    drive(h).await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_between_claim_and_park_wakes_the_row_the_same_way() {
    let hold = Arc::new(Hold::default());
    let projections = both!(
        |h| h.register(Approvals {
            hold: Arc::clone(&hold),
        }),
        between_claim_and_park(&hold)
    );
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Finished);
    assert_eq!(run.signals[1].consumed_by, Some(1));
    assert_eq!(run.signals[0].consumed_by, None);
}

/// A signal fails the first attempt, which is reattempted after a second signal.
async fn reattempt_after_a_signal<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let run = h.start::<Approvals>(&1).await;
    h.run_until_idle().await;
    h.signal(run, "approval", &serde_json::json!({"flaky": true}))
        .await
        .expect("sent");
    h.run_until_idle().await; // attempt 1 takes it and fails
    h.signal(run, "approval", &serde_json::json!({"n": 2}))
        .await
        .expect("sent");
    h.advance(Duration::from_secs(30));
    drive(h).await;
    vec![run]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_sees_the_signal_its_first_attempt_took() {
    let projections = both!(|h| h.register(approvals()), reattempt_after_a_signal());
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

/// A run of each `on_timeout` past its deadline, and a signal just in time.
async fn on_timeouts<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let pause = h.start::<TimeoutPause>(&1).await;
    let cancel = h.start::<TimeoutCancel>(&1).await;
    let skip = h.start::<TimeoutSkip>(&1).await;
    let run = h.start::<TimeoutRun>(&1).await;
    // Past its deadline but not yet claimed: the signal still wins.
    let late_signal = h.start::<TimeoutRun>(&2).await;
    h.run_until_idle().await;
    h.advance(Duration::from_secs(599));
    h.run_until_idle().await;
    for id in [pause, cancel, skip, run] {
        assert_eq!(
            h.view(id).await.steps[0].status,
            StepStatus::Waiting,
            "9m59s is not 10m"
        );
    }
    h.advance(Duration::from_secs(1));
    h.signal(late_signal, "go", &serde_json::json!("just in time"))
        .await
        .expect("sent");
    h.run_until_idle().await;
    let refused = h.signal(cancel, "go", &1).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("has ended (cancelled)")),
        "{refused:?}"
    );
    // The paused one: resuming waits afresh; a signal then ends the wait.
    h.advance(Duration::from_mins(1));
    assert_eq!(
        h.act(pause, Action::Resume, "wait again").await,
        Ok(RunStatus::Ready)
    );
    h.run_until_idle().await;
    h.signal(pause, "go", &serde_json::json!("at last"))
        .await
        .expect("sent");
    drive(h).await;
    vec![pause, cancel, skip, run, late_signal]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_on_timeout_applies_the_same_way() {
    let projections = both!(
        |h| h
            .register(TimeoutPause)
            .register(TimeoutCancel)
            .register(TimeoutSkip)
            .register(TimeoutRun),
        on_timeouts()
    );

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

/// Operators pause, resume and skip runs whose step waits for a signal.
async fn around_a_waiting_step<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    let signalled = h.start::<Approvals>(&1).await;
    let unsignalled = h.start::<Approvals>(&2).await;
    let skipped = h.start::<Approvals>(&3).await;
    let early = h.start::<Approvals>(&4).await;
    let expired = h.start::<TimeoutPause>(&5).await;
    assert_eq!(
        h.act(early, Action::Pause, "before it starts").await,
        Ok(RunStatus::Paused)
    );
    h.run_until_idle().await; // the others park
    for run in [signalled, unsignalled, skipped, expired] {
        assert_eq!(
            h.act(run, Action::Pause, "hold on").await,
            Ok(RunStatus::Paused)
        );
    }
    // A signal to a paused run: kept, and its waiting row woken, but
    // nothing runs until the run is resumed.
    h.signal(signalled, "approval", &serde_json::json!({"n": 1}))
        .await
        .expect("sent");
    h.signal(early, "approval", &serde_json::json!({"n": 4}))
        .await
        .expect("sent");
    h.advance(Duration::from_mins(11));
    h.run_until_idle().await;
    assert_eq!(
        h.view(signalled).await.steps[1].status,
        StepStatus::Scheduled
    );
    let refused = h.act(signalled, Action::Skip, "r").await;
    assert!(refused.is_ok(), "a woken row can be skipped: {refused:?}");
    for run in [unsignalled, early, expired] {
        assert_eq!(
            h.act(run, Action::Resume, "go on").await,
            Ok(RunStatus::Ready)
        );
    }
    assert_eq!(
        h.act(skipped, Action::Skip, "no approval needed").await,
        Ok(RunStatus::Ready)
    );
    h.run_until_idle().await;
    // Still waiting: nothing came.
    assert_eq!(
        h.view(unsignalled).await.steps[1].status,
        StepStatus::Waiting
    );
    h.signal(unsignalled, "approval", &serde_json::json!({"n": 2}))
        .await
        .expect("sent");
    drive(h).await;
    vec![signalled, unsignalled, skipped, early, expired]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_skip_around_a_waiting_step_agree() {
    let projections = both!(
        |h| h.register(approvals()).register(TimeoutPause),
        around_a_waiting_step()
    );
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
