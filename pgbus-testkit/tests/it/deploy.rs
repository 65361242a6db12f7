//! The deploy check's replay (`pgbus_testkit::deploy::verdict`) held to what
//! the engine really does: a run of the old version parked at each position,
//! its export judged against a new version, then the new version registered
//! in its place and the run driven on (signals sent as the new version's
//! senders would, the clock moved past the grace, the sweep run). Each verdict
//! must be what happens.

use std::time::Duration;

use pgbus_runtime::deploy::Definitions;
use pgbus_runtime::engine::{Stop, Verdict, VerdictKind};
use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus, StepStatus};
use pgbus_testkit::TestEnv;

struct V1;

#[workflow(name = "deploy.orders")]
impl V1 {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Adds `audit` after `reserve`.
struct Added;

#[workflow(name = "deploy.orders")]
impl Added {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn audit(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Removes `charge` with a gravestone.
struct Buried;

#[workflow(name = "deploy.orders")]
impl Buried {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    removed_step!(charge);
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Removes `charge` without a gravestone.
struct Removed;

#[workflow(name = "deploy.orders")]
impl Removed {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Renames `charge` to `charge_card`, without a gravestone.
struct Renamed;

#[workflow(name = "deploy.orders")]
impl Renamed {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn charge_card(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// `await_payment` waits for `payment.settled` instead of `paid`.
struct Resignalled;

#[workflow(name = "deploy.orders")]
impl Resignalled {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "payment.settled")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Every step moved to queue `orders-v2`: its workers claim from no other.
struct Moved;

#[workflow(name = "deploy.orders", queue = "orders-v2")]
impl Moved {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Where a run of [`V1`] is parked.
#[derive(Debug, Clone, Copy)]
enum At {
    /// `reserve`, scheduled: started, nothing run.
    Reserve,
    /// `charge`, scheduled.
    Charge,
    /// `await_payment`, parked for `paid`.
    AwaitPayment,
    /// `ship`, scheduled: paid.
    Ship,
}

/// An environment of [`V1`] with one run parked `at`.
async fn parked(at: At) -> (TestEnv, RunId) {
    let env = TestEnv::new().register(V1);
    let run = env.start::<V1>(&()).expect("start").run_id;
    let steps = match at {
        At::Reserve => 0,
        At::Charge => 1,
        At::AwaitPayment | At::Ship => 3,
    };
    for _ in 0..steps {
        env.run_next().await.expect("a due step");
    }
    if matches!(at, At::Ship) {
        env.signal(run, "paid", &()).expect("signal");
        env.run_next().await.expect("await_payment");
    }
    (env, run)
}

/// The replay's verdict on `run`, from its export.
fn replay<W: Workflow>(env: &TestEnv, run: RunId) -> Verdict {
    let export = serde_json::to_value(env.run(run).expect("run")).expect("JSON");
    pgbus_testkit::deploy::verdict(&export, &Definitions::of([W::DEFINITION])).expect("a verdict")
}

/// What happens to `run` once `W` replaces [`V1`]: the run driven on, with
/// `signal` sent (the new version's senders), the clock past the grace and
/// a sweep; returns its status, the steps it ran or skipped in order, and
/// the steps of its open rows.
async fn drive<W: Workflow>(env: TestEnv, run: RunId, w: W, signal: &str) -> Outcome {
    let env = env.register(w);
    env.run_until_idle().await;
    match env.signal(run, signal, &()) {
        Ok(_) | Err(Error::RunEnded { .. }) => {}
        Err(error) => panic!("signal: {error}"),
    }
    env.run_until_idle().await;
    env.advance(Duration::from_secs(301));
    env.sweep();
    env.run_until_idle().await;
    let view = env.run(run).expect("run");
    let mut done = Vec::new();
    let mut open = Vec::new();
    for step in &view.steps {
        match step.status {
            StepStatus::Completed => done.push(step.step_name.clone()),
            StepStatus::Skipped => done.push(format!("-{}", step.step_name)),
            StepStatus::Scheduled | StepStatus::Waiting => open.push(step.step_name.clone()),
            _ => {}
        }
    }
    Outcome {
        status: view.run.status,
        error_class: view.error_class,
        done,
        open,
    }
}

#[derive(Debug)]
struct Outcome {
    status: RunStatus,
    error_class: Option<String>,
    done: Vec<String>,
    open: Vec<String>,
}

const ALL: [At; 4] = [At::Reserve, At::Charge, At::AwaitPayment, At::Ship];

#[tokio::test]
async fn an_added_step_is_missed_and_the_run_finishes_without_it() {
    for at in ALL {
        let (env, run) = parked(at).await;
        let verdict = replay::<Added>(&env, run);
        assert_eq!(verdict.verdict, VerdictKind::MissesInserted, "{at:?}");
        assert_eq!(verdict.missed, ["audit"]);
        let outcome = drive(env, run, Added, "paid").await;
        assert_eq!(outcome.status, RunStatus::Finished, "{at:?}: {outcome:?}");
        assert!(!outcome.done.contains(&"audit".to_owned()), "{outcome:?}");
    }
}

#[tokio::test]
async fn a_gravestone_is_skipped_by_runs_that_had_it_ahead() {
    for (at, expected) in [
        (At::Reserve, VerdictKind::SkipsGravestone),
        (At::Charge, VerdictKind::SkipsGravestone),
        (At::AwaitPayment, VerdictKind::Advances),
        (At::Ship, VerdictKind::Advances),
    ] {
        let (env, run) = parked(at).await;
        let verdict = replay::<Buried>(&env, run);
        assert_eq!(verdict.verdict, expected, "{at:?}");
        let outcome = drive(env, run, Buried, "paid").await;
        assert_eq!(outcome.status, RunStatus::Finished, "{at:?}: {outcome:?}");
        let charged = outcome.done.iter().any(|s| s == "charge");
        assert_eq!(
            charged,
            matches!(at, At::AwaitPayment | At::Ship),
            "{at:?}: only runs past it had run it: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn a_removal_without_a_gravestone_pauses_the_runs_that_had_it_ahead() {
    for (at, expected) in [
        (At::Reserve, VerdictKind::PausesStepNotDefined),
        (At::Charge, VerdictKind::PausesStepNotDefined),
        (At::AwaitPayment, VerdictKind::Advances),
        (At::Ship, VerdictKind::Advances),
    ] {
        let (env, run) = parked(at).await;
        let verdict = replay::<Removed>(&env, run);
        assert_eq!(verdict.verdict, expected, "{at:?}");
        let outcome = drive(env, run, Removed, "paid").await;
        if expected == VerdictKind::Advances {
            assert_eq!(outcome.status, RunStatus::Finished, "{at:?}: {outcome:?}");
        } else {
            assert_eq!(verdict.stop.as_ref().map(Stop::step), Some("charge"));
            assert_eq!(outcome.status, RunStatus::Paused, "{at:?}: {outcome:?}");
            assert_eq!(
                outcome.error_class.as_deref(),
                Some("pgbus_runtime::error::StepNotDefined")
            );
        }
    }
}

#[tokio::test]
async fn a_rename_pauses_runs_before_it_and_is_missed_by_runs_past_it() {
    for (at, expected) in [
        (At::Reserve, VerdictKind::PausesStepNotDefined),
        (At::Charge, VerdictKind::PausesStepNotDefined),
        (At::AwaitPayment, VerdictKind::MissesInserted),
        (At::Ship, VerdictKind::MissesInserted),
    ] {
        let (env, run) = parked(at).await;
        let verdict = replay::<Renamed>(&env, run);
        assert_eq!(verdict.verdict, expected, "{at:?}");
        assert_eq!(verdict.missed, ["charge_card"]);
        let outcome = drive(env, run, Renamed, "paid").await;
        let status = if expected.stops() {
            RunStatus::Paused
        } else {
            RunStatus::Finished
        };
        assert_eq!(outcome.status, status, "{at:?}: {outcome:?}");
        assert!(!outcome.done.contains(&"charge_card".to_owned()));
    }
}

#[tokio::test]
async fn a_run_parked_for_a_signal_the_new_version_does_not_wait_for_waits() {
    for (at, expected) in [
        (At::Charge, VerdictKind::Advances),
        (At::AwaitPayment, VerdictKind::Waits),
        (At::Ship, VerdictKind::Advances),
    ] {
        let (env, run) = parked(at).await;
        let verdict = replay::<Resignalled>(&env, run);
        assert_eq!(verdict.verdict, expected, "{at:?}");
        let outcome = drive(env, run, Resignalled, "payment.settled").await;
        if expected == VerdictKind::Waits {
            assert_eq!(outcome.status, RunStatus::Ready, "{outcome:?}");
            assert_eq!(outcome.open, ["await_payment"], "still parked for `paid`");
        } else {
            assert_eq!(outcome.status, RunStatus::Finished, "{at:?}: {outcome:?}");
        }
    }
}

#[tokio::test]
async fn a_row_on_a_queue_the_new_workers_do_not_claim_from_waits() {
    let (env, run) = parked(At::Charge).await;
    let verdict = replay::<Moved>(&env, run);
    assert_eq!(verdict.verdict, VerdictKind::Waits);
    assert_eq!(
        verdict.stop,
        Some(Stop::QueueNotServed {
            step: "charge".to_owned(),
            queue: "default".to_owned()
        })
    );
    let outcome = drive(env, run, Moved, "paid").await;
    assert_eq!(outcome.status, RunStatus::Ready, "{outcome:?}");
    assert_eq!(
        outcome.open,
        ["charge"],
        "nobody claims it, and nothing pauses it"
    );
}

#[tokio::test]
async fn a_show_export_reads_the_same_and_a_bad_one_is_refused() {
    let (env, run) = parked(At::Charge).await;
    let view = serde_json::to_value(env.run(run).expect("run")).expect("JSON");
    // `pgbus show --json` wraps the view.
    let show = serde_json::json!({"run": view, "timeline": [], "counts": {}});
    let new = Definitions::of([Removed::DEFINITION]);
    assert_eq!(
        pgbus_testkit::deploy::verdict(&show, &new).expect("a verdict"),
        pgbus_testkit::deploy::verdict(&view, &new).expect("a verdict")
    );

    let refused = pgbus_testkit::deploy::verdict(&serde_json::json!({"id": 1}), &new);
    assert!(
        matches!(&refused, Err(Error::InvalidRunExport { reason }) if reason.contains("missing field `run`")),
        "{refused:?}"
    );
    let other = pgbus_testkit::deploy::verdict(&view, &Definitions::of([Other::DEFINITION]));
    assert!(
        matches!(&other, Err(Error::InvalidDefinitions { reason }) if reason.contains("`deploy.orders`")),
        "{other:?}"
    );
    env.cancel(run, "test", "done").expect("cancel");
    let ended = serde_json::to_value(env.run(run).expect("run")).expect("JSON");
    let refused = pgbus_testkit::deploy::verdict(&ended, &new);
    assert!(
        matches!(&refused, Err(Error::InvalidRunExport { reason }) if reason.contains("has ended (cancelled)")),
        "{refused:?}"
    );
}

struct Other;

#[workflow(name = "deploy.other")]
impl Other {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}
