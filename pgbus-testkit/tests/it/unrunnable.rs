//! Runs the environment cannot run say so (issue 19): a fan_out child of a
//! workflow nobody registered, and a run started under a version whose step
//! the registered one lacks, in the run's view, the parent's batch, the
//! listing and `run_to_completion`'s error.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::view::Missing;
use pgbus_runtime::{Error, RunFilter, RunStatus};
use pgbus_testkit::{TestEnv, default_start};

/// Ships each parcel in a child run, then closes.
struct Dispatch;

#[workflow(name = "stuck.dispatch", input = Vec<u32>)]
impl Dispatch {
    #[fan_out]
    async fn ship_all(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        for parcel in cx.input().clone() {
            fan.start::<Parcel>(&parcel)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn close(&self, _cx: &mut StepCx<Vec<u32>>) {}
}

/// The child workflow, which the environment forgets at first.
struct Parcel;

#[workflow(name = "stuck.parcel", input = u32)]
impl Parcel {
    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_fan_out_child_of_an_unregistered_workflow_is_named() {
    let env = TestEnv::new().register(Dispatch);
    let parent = env.start::<Dispatch>(&vec![1, 2]).unwrap().run_id;
    let error = env
        .run_to_completion()
        .await
        .expect_err("the children cannot run");
    let Error::RunUnrunnable {
        run_id: child,
        unrunnable,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_ne!(*child, parent);
    assert_eq!(unrunnable.missing, Missing::Workflow);
    assert_eq!(
        (unrunnable.workflow.as_str(), unrunnable.step_name.as_str()),
        ("stuck.parcel", "ship")
    );
    assert_eq!(unrunnable.since, default_start());
    let text = error.to_string();
    for part in [
        &format!("run {child} cannot go on"),
        "no live worker registered workflow `stuck.parcel`",
        "register `stuck.parcel` with `TestEnv::register`",
    ] {
        assert!(text.contains(part), "`{part}` in: {text}");
    }

    // The child's view says the same; the parent's batch names the child.
    let view = env.run(*child).unwrap();
    assert_eq!(view.unrunnable.as_ref(), Some(&**unrunnable));
    assert_eq!(view.run.unrunnable, Some(Missing::Workflow));
    let parent_view = env.run(parent).unwrap();
    assert_eq!(
        parent_view.unrunnable, None,
        "the parent waits on its batch"
    );
    assert_eq!(parent_view.batches[0].unrunnable_child, Some(*child));
    let marked: Vec<(RunId, Option<Missing>)> = env
        .list_runs(&RunFilter::new())
        .unwrap()
        .iter()
        .map(|r| (r.id, r.unrunnable))
        .collect();
    assert_eq!(
        marked.iter().filter(|(_, m)| m.is_some()).count(),
        2,
        "both children are marked: {marked:?}"
    );
    assert!(marked.contains(&(parent, None)));

    // Registered, they run, and nothing is marked any more.
    let env = env.register(Parcel);
    env.run_to_completion().await.expect("everything runs now");
    let view = env.run(parent).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.batches[0].unrunnable_child, None);
    assert_eq!(env.run(*child).unwrap().unrunnable, None);
}

/// A first version, which the environment runs...
struct Audit;

#[workflow(name = "stuck.audit", input = u32)]
impl Audit {
    #[step]
    async fn collect(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn report(&self, _cx: &mut StepCx<u32>) {}
}

/// ...and a later one, which inserted `review` an hour after `collect`.
struct AuditV2;

#[workflow(name = "stuck.audit", input = u32)]
impl AuditV2 {
    #[step]
    async fn collect(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait = "1h")]
    async fn review(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn report(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_step_the_registered_version_lacks_is_named_once_due() {
    use pgbus_runtime::store::Store as _;
    let env = TestEnv::new().register(Audit);
    let (run, _) = env
        .store()
        .start_run(
            AuditV2::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    env.run_until_idle().await;
    // `review` is not due for an hour: nothing to say yet.
    assert_eq!(env.run(run).unwrap().unrunnable, None);

    let error = env
        .run_to_completion()
        .await
        .expect_err("`review` cannot run here");
    let due = default_start() + chrono::Duration::hours(1);
    assert_eq!(env.now(), due, "the clock went to when it was due");
    match &error {
        Error::RunUnrunnable { run_id, unrunnable } => {
            assert_eq!(*run_id, run);
            assert_eq!(unrunnable.missing, Missing::Step);
            assert_eq!(unrunnable.step_name, "review");
            assert_eq!(unrunnable.since, due);
        }
        other => panic!("{other:?}"),
    }
    let text = error.to_string();
    assert!(
        text.contains("no live worker's definition of workflow `stuck.audit` has step `review`")
            && text.contains("removed_step!(review)"),
        "{text}"
    );

    // The grace rule still applies when the test sweeps.
    env.advance(Duration::from_mins(6));
    assert_eq!(env.sweep().undefined_paused, 1);
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(view.unrunnable, None, "paused, with its own error");
    env.run_to_completion()
        .await
        .expect("a paused run is not stuck: it waits for an operator");
}

/// A run started on a queue the environment does not claim: `queue`, named
/// in `run_to_completion`'s error with what to do, until the environment
/// claims it.
#[tokio::test]
async fn a_run_on_a_queue_nobody_claims_says_queue() {
    let env = TestEnv::new().register(Parcel);
    let run = env
        .start_with::<Parcel>(&1, &pgbus_runtime::StartOptions::new().queue("elsewhere"))
        .unwrap()
        .run_id;
    let error = env
        .run_to_completion()
        .await
        .expect_err("nobody claims `elsewhere`");
    let Error::RunUnrunnable { unrunnable, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        (unrunnable.missing, unrunnable.queue.as_str()),
        (Missing::Queue, "elsewhere")
    );
    let text = error.to_string();
    for part in [
        &format!("run {run} cannot go on"),
        "no live worker that has step `ship` of workflow `stuck.parcel` claims from queue `elsewhere`",
        "`TestEnv::queue` in a test",
    ] {
        assert!(text.contains(part), "`{part}` in: {text}");
    }
    assert_eq!(env.run(run).unwrap().run.unrunnable, Some(Missing::Queue));

    let env = env.queue("elsewhere");
    assert_eq!(env.run(run).unwrap().unrunnable, None);
    env.run_to_completion().await.expect("runs");
    assert_eq!(env.run(run).unwrap().run.status, RunStatus::Finished);
}
