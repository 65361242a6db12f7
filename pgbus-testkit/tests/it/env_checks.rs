//! The environment's checks and starts: inputs Postgres cannot hold, size
//! settings, workflows and steps it has not registered, mistyped signals, and
//! start options and bulk starts on the virtual clock.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunFilter, RunStatus};
use pgbus_testkit::TestEnv;

use crate::env::Restock;

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
