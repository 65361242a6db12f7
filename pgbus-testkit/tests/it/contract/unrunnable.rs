//! Runs nobody can run (issue 19): both stores read what no live worker has
//! of a `ready` run's due step (its workflow, its step, or a claim of its
//! queue), in the run's view and the listing, by the registry, and stop
//! saying it once a worker that has it registers.

use std::time::Duration;

use pgbus_runtime::engine::{Action, AttemptResult, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Registration, Runner, Store};
use pgbus_runtime::view::Missing;
use pgbus_runtime::{RunFilter, RunRead, WorkflowDefinition};
use pgbus_testkit::default_start;

use super::{Clocked, Pinned, WORKER, memory};

/// Two versions of one workflow: the second adds `check`.
struct PostV1;

#[workflow(name = "contract.post", input = u8)]
impl PostV1 {
    #[step]
    async fn write(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<u8>) {}
}

struct PostV2;

#[workflow(name = "contract.post", input = u8)]
impl PostV2 {
    #[step]
    async fn write(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn check(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn send(&self, _cx: &mut StepCx<u8>) {}
}

async fn register<S: Store>(store: &S, worker: &str, definitions: &[&'static WorkflowDefinition]) {
    register_on(store, worker, definitions, &[PostV1::DEFINITION.queue]).await;
}

/// `worker` registers `definitions`, claiming from `queues`.
async fn register_on<S: Store>(
    store: &S,
    worker: &str,
    definitions: &[&'static WorkflowDefinition],
    queues: &[&str],
) {
    let queues: Vec<String> = queues.iter().map(|q| (*q).to_owned()).collect();
    store
        .register_worker(&Registration {
            worker_id: worker,
            name: worker,
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 1,
            definitions,
            queue_limits: &[],
        })
        .await
        .expect("a registration");
}

/// What the run's view says is missing, as `(missing, step, since)`, and
/// the listing's mark of it, which must agree.
async fn said<S: Store>(
    store: &S,
    run: RunId,
) -> Option<(Missing, String, chrono::DateTime<chrono::Utc>)> {
    let view = store.run(run, RunRead::default()).await.expect("the run");
    let listed = store
        .list_runs(&RunFilter::new())
        .await
        .expect("the listing");
    let mark = listed
        .iter()
        .find(|r| r.id == run)
        .expect("listed")
        .unrunnable;
    let said = view.unrunnable.map(|u| (u.missing, u.step_name, u.since));
    assert_eq!(mark, said.as_ref().map(|s| s.0), "the listing agrees");
    assert_eq!(view.run.unrunnable, mark, "the view's summary agrees");
    said
}

/// No live worker registered the workflow: `workflow`, since the row was
/// due. A worker whose definition has the step: nothing. A worker whose
/// definition lacks the next step: `step`, until one that has it registers,
/// and again once that one is gone. A paused run: nothing.
async fn a_run_nobody_can_run_says_what_is_missing<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (run, _) = store
        .start_run(
            PostV2::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let start = default_start();
    assert_eq!(
        said(store, run).await,
        Some((Missing::Workflow, "write".to_owned(), start))
    );

    register(store, WORKER, &[PostV1::DEFINITION]).await;
    assert_eq!(said(store, run).await, None, "v1 has `write`");
    let v1 = Runner::new(store.clone(), WORKER).register(PostV1);
    let queues = vec![PostV1::DEFINITION.queue.to_owned()];
    let write = v1.claim(&queues, 1).await.expect("a claim").pop();
    let write = write.expect("`write` is due");
    assert_eq!(said(store, run).await, None, "performing");
    clocked.advance(Duration::from_secs(2));
    store
        .end_attempt(
            PostV1::DEFINITION,
            &write,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
    let due = start + chrono::Duration::seconds(2);
    assert_eq!(
        said(store, run).await,
        Some((Missing::Step, "check".to_owned(), due))
    );

    register(store, "v2-worker", &[PostV2::DEFINITION]).await;
    assert_eq!(said(store, run).await, None, "v2 has `check`");

    clocked.worker_died("v2-worker").await;
    clocked.advance(Duration::from_mins(1));
    register(store, WORKER, &[PostV1::DEFINITION]).await; // a heartbeat
    assert_eq!(
        said(store, run).await,
        Some((Missing::Step, "check".to_owned(), due)),
        "the worker that had it is gone"
    );

    store
        .act(run, Action::Pause, "ops", "look")
        .await
        .expect("a pause");
    assert_eq!(said(store, run).await, None, "a paused run waits for ops");
}

/// A workflow of its own, for a worker that claims a queue but not for
/// `contract.post`.
struct Elsewhere;

#[workflow(name = "contract.elsewhere", queue = "kids")]
impl Elsewhere {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// A run placed on a queue (here by its start's options) that no live
/// worker holding its step claims from: `queue`, naming the row's queue,
/// also while another worker claims that queue for other workflows; nothing
/// once a worker that has the step claims it.
async fn a_run_on_a_queue_no_worker_of_its_step_claims_says_queue<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (run, _) = store
        .start_run(
            PostV1::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new().queue("kids"),
        )
        .await
        .expect("a start");
    let queue_of = |view: &pgbus_runtime::RunView| view.unrunnable.clone().map(|u| u.queue);
    register_on(store, WORKER, &[PostV1::DEFINITION], &["default"]).await;
    assert_eq!(
        said(store, run).await,
        Some((Missing::Queue, "write".to_owned(), default_start()))
    );
    let view = store.run(run, RunRead::default()).await.expect("the run");
    assert_eq!(queue_of(&view).as_deref(), Some("kids"));
    assert_eq!(
        view.unrunnable.map(|u| u.to_string()).as_deref(),
        Some(
            "no live worker that has step `write` of workflow `contract.post` claims from queue `kids`"
        )
    );

    register_on(store, "kids-worker", &[Elsewhere::DEFINITION], &["kids"]).await;
    assert_eq!(
        said(store, run).await.map(|s| s.0),
        Some(Missing::Queue),
        "the worker that claims `kids` does not have the step"
    );

    register_on(
        store,
        "post-kids",
        &[PostV1::DEFINITION],
        &["default", "kids"],
    )
    .await;
    assert_eq!(
        said(store, run).await,
        None,
        "a worker of the step claims `kids`"
    );
}

both_stores!(
    a_run_nobody_can_run_says_what_is_missing,
    a_run_on_a_queue_no_worker_of_its_step_claims_says_queue,
);
