//! Runs nobody can run (issue 19) on Postgres with real workers: a run of a
//! workflow no live worker registered, a step the live worker's definition
//! lacks, and a fan_out child of an unregistered workflow say so in
//! `Client::run`, `Client::list_runs` and the parent's batch, and stop once a
//! worker that has what was missing registers.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::view::Missing;
use pgbus_runtime::{RunFilter, RunRead, RunStatus};

use crate::pg::{TestDb, t0};

/// The version the first worker runs...
struct NoteV1;

#[workflow(name = "unrunnable.note", input = u32)]
impl NoteV1 {
    #[step]
    async fn draft(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn file(&self, _cx: &mut StepCx<u32>) {}
}

/// ...and the one a newer client starts runs of, with `sign` inserted.
struct NoteV2;

#[workflow(name = "unrunnable.note", input = u32)]
impl NoteV2 {
    #[step]
    async fn draft(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn sign(&self, _cx: &mut StepCx<u32>) {}

    #[step]
    async fn file(&self, _cx: &mut StepCx<u32>) {}
}

/// A workflow no worker registers until the end.
struct Orphan;

#[workflow(name = "unrunnable.orphan")]
impl Orphan {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// The listing's mark of `run`.
async fn mark(t: &TestDb, run: RunId) -> Option<Missing> {
    t.client()
        .list_runs(&RunFilter::new())
        .await
        .expect("the listing")
        .into_iter()
        .find(|r| r.id == run)
        .expect("listed")
        .unrunnable
}

#[tokio::test]
async fn a_run_nobody_can_run_says_what_is_missing_until_a_worker_has_it() {
    let t = TestDb::new().await;
    let client = t.client();
    let orphan = client.start::<Orphan>(&()).await.expect("start").run_id;
    let note = client.start::<NoteV2>(&1).await.expect("start").run_id;

    // No worker at all: both say the workflow is missing, since their start.
    let view = t.run(orphan).await;
    let unrunnable = view.unrunnable.expect("unrunnable");
    assert_eq!(unrunnable.missing, Missing::Workflow);
    assert_eq!(
        (unrunnable.workflow.as_str(), unrunnable.step_name.as_str()),
        ("unrunnable.orphan", "only")
    );
    assert_eq!(unrunnable.since, t0());
    assert_eq!(unrunnable.step_id, view.steps[0].id);
    assert_eq!(view.run.unrunnable, Some(Missing::Workflow));
    assert_eq!(mark(&t, note).await, Some(Missing::Workflow));

    // A v1 worker: `draft` runs, then `sign` (which v1 lacks) waits.
    let v1 = t.db.worker().register(NoteV1).build().expect("worker");
    v1.run_once().await.expect("a claim registers the worker");
    assert_eq!(t.run(note).await.run.current_step.as_deref(), Some("sign"));
    t.clock.advance(Duration::from_secs(5));
    v1.heartbeat().await.expect("heartbeat");
    let view = t.run(note).await;
    assert_eq!(view.run.status, RunStatus::Ready);
    let unrunnable = view.unrunnable.expect("`sign` is missing");
    assert_eq!(
        (unrunnable.missing, unrunnable.step_name.as_str()),
        (Missing::Step, "sign")
    );
    assert_eq!(unrunnable.since, t0(), "due since `draft` ended");
    assert_eq!(mark(&t, note).await, Some(Missing::Step));
    assert_eq!(
        mark(&t, orphan).await,
        Some(Missing::Workflow),
        "another workflow's worker does not count"
    );

    // The read's own lost-worker threshold: a minute of silence is a lost
    // worker at the default 30 s, a live one at 5 minutes.
    t.clock.advance(Duration::from_mins(1));
    assert_eq!(
        t.run(note).await.unrunnable.map(|u| u.missing),
        Some(Missing::Workflow)
    );
    let patient = RunRead::default().lost_worker_threshold(Duration::from_mins(5));
    let view = client.run_with(note, patient).await.expect("the run");
    assert_eq!(view.unrunnable.map(|u| u.missing), Some(Missing::Step));
    let listed = client
        .list_runs(&RunFilter::new().lost_worker_threshold(Duration::from_mins(5)))
        .await
        .expect("the listing");
    let listed = listed.iter().find(|r| r.id == note).expect("listed");
    assert_eq!(listed.unrunnable, Some(Missing::Step));

    // Workers that have what was missing: the marks go, and the runs finish.
    let v2 =
        t.db.worker()
            .register(NoteV2)
            .register(Orphan)
            .build()
            .expect("worker");
    v2.heartbeat()
        .await
        .expect("a heartbeat registers the worker");
    assert_eq!(t.run(note).await.unrunnable, None);
    assert_eq!(mark(&t, orphan).await, None);
    v2.run_until_idle().await.expect("run");
    assert_eq!(t.run(note).await.run.status, RunStatus::Finished);
    assert_eq!(t.run(orphan).await.run.status, RunStatus::Finished);
    assert_eq!(mark(&t, note).await, None, "an ended run has no mark");
}

/// Ships each parcel in a child run.
struct Dispatch;

#[workflow(name = "unrunnable.dispatch", input = Vec<u32>)]
impl Dispatch {
    #[fan_out]
    async fn ship_all(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        for parcel in cx.input().clone() {
            fan.start::<Parcel>(&parcel)?;
        }
        Ok(Flow::Complete)
    }
}

/// The children's workflow, which the first worker forgot to register.
struct Parcel;

#[workflow(name = "unrunnable.parcel", input = u32)]
impl Parcel {
    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_fan_out_child_of_an_unregistered_workflow_shows_on_its_parent() {
    let t = TestDb::new().await;
    let parent = t
        .client()
        .start::<Dispatch>(&vec![1, 2, 3])
        .await
        .expect("start")
        .run_id;
    let forgetful = t.db.worker().register(Dispatch).build().expect("worker");
    forgetful.run_until_idle().await.expect("run");

    let view = t.run(parent).await;
    assert_eq!(view.unrunnable, None, "the parent waits on its batch");
    let batch = &view.batches[0];
    let child = batch.unrunnable_child.expect("a stuck child is named");
    let child_view = t.run(child).await;
    assert_eq!(child_view.parent_batch_id, Some(batch.id));
    let unrunnable = child_view.unrunnable.expect("the child says why");
    assert_eq!(
        (unrunnable.missing, unrunnable.workflow.as_str()),
        (Missing::Workflow, "unrunnable.parcel")
    );
    let children: Vec<RunId> = t
        .client()
        .list_runs(&RunFilter::new().workflow("unrunnable.parcel"))
        .await
        .expect("the listing")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        Some(child),
        children.iter().copied().min(),
        "the lowest id of the stuck children"
    );

    let fixed =
        t.db.worker()
            .register(Dispatch)
            .register(Parcel)
            .build()
            .expect("worker");
    fixed
        .heartbeat()
        .await
        .expect("a heartbeat registers the worker");
    assert_eq!(t.run(parent).await.batches[0].unrunnable_child, None);
    fixed.run_until_idle().await.expect("run");
    let view = t.run(parent).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.batches[0].unrunnable_child, None, "resolved");
}

/// A fan_out child placed on a queue the workers of its workflow do not
/// claim (its parent's worker without the deployment's queue override of
/// it): the child says `queue`, naming the row's queue, its parent's batch
/// names it, and both listings mark it, until a worker claims the queue.
#[tokio::test]
async fn a_child_on_a_queue_its_workers_do_not_claim_says_queue() {
    let t = TestDb::new().await;
    let kids = pgbus_runtime::Overrides::new().workflow("unrunnable.parcel", |w| w.queue("kids"));
    let db = t.db.with_overrides(kids).expect("valid overrides");
    let parents = db
        .worker()
        .register(Dispatch)
        .overrides(pgbus_runtime::Overrides::new())
        .build()
        .expect("worker");
    let children = db.worker().register(Parcel).build().expect("worker");
    let parent = db
        .client()
        .start::<Dispatch>(&vec![1])
        .await
        .expect("start")
        .run_id;
    parents.run_until_idle().await.expect("run");
    assert_eq!(
        children.run_until_idle().await.expect("run"),
        0,
        "kids only"
    );

    let child = t.run(parent).await.batches[0]
        .unrunnable_child
        .expect("the stuck child is named");
    let unrunnable = t.run(child).await.unrunnable.expect("the child says why");
    assert_eq!(
        (
            unrunnable.missing,
            unrunnable.step_name.as_str(),
            unrunnable.queue.as_str()
        ),
        (Missing::Queue, "ship", "default")
    );
    assert_eq!(mark(&t, child).await, Some(Missing::Queue));
    let by_workflow = t
        .client()
        .list_runs(&RunFilter::new().workflow("unrunnable.parcel"))
        .await
        .expect("the listing");
    assert_eq!(by_workflow[0].unrunnable, Some(Missing::Queue));
    let by_prefix = t
        .client()
        .list_runs(&RunFilter::new().workflow_prefix("unrunnable.par"))
        .await
        .expect("the listing");
    assert_eq!(by_prefix[0].unrunnable, Some(Missing::Queue));

    let default =
        t.db.worker()
            .register(Parcel)
            .queue("default")
            .build()
            .expect("worker");
    default
        .heartbeat()
        .await
        .expect("a heartbeat registers the worker");
    assert_eq!(t.run(child).await.unrunnable, None);
    assert_eq!(t.run(parent).await.batches[0].unrunnable_child, None);
}
