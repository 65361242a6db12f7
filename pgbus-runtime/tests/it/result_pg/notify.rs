//! The run-end notification: sent by the trigger of migration 0014 on every
//! path that ends or pauses a run, and nothing else; and the waits' fallback
//! when a notification is missed or the `LISTEN` connection is killed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus, StallAction};
use tokio::sync::Notify;

use super::{BOUND, Ends, Gate, NEVER, Ship, listeners, listening, run_due};
use crate::pg::{TestDb, eventually};

/// Starts two children and waits for them.
struct Parent;

#[workflow(name = "result.parent")]
impl Parent {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Child>(&1)?;
        fan.start::<Child>(&2)?;
        Ok(Flow::Complete)
    }
}

struct Child;

#[workflow(name = "result.child", input = u32)]
impl Child {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

/// A body that hangs until released, past its 5 s timeout.
struct Hung {
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

#[workflow(name = "result.hung")]
impl Hung {
    #[step(timeout = "5s")]
    async fn slow(&self, _cx: &mut StepCx<()>) {
        self.entered.notify_one();
        self.release.notified().await;
    }
}

/// Cancels a fresh run of `Gate` and returns its id: a notification to
/// fence with (notifications arrive in commit order, so one that comes
/// before it was sent before it).
async fn marker(t: &TestDb) -> i64 {
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    client
        .cancel(run, "test", "marker")
        .await
        .expect("a cancel");
    run.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_is_notified_once_and_its_steps_are_not() {
    let t = TestDb::new().await;
    let mut ends = Ends::listen(&t).await;
    let client = t.client();
    let run = client.start::<Ship>(&1).await.expect("a start").run_id;
    assert_eq!(run_due(&t).await, 2);
    assert_eq!(ends.next().await, run.0, "its end, once");
    let fence = marker(&t).await;
    assert_eq!(ends.next().await, fence, "its first step sent nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_pause_and_cancel_are_notified_and_a_resume_is_not() {
    let t = TestDb::new().await;
    let mut ends = Ends::listen(&t).await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    client.pause(run, "ops", "hold").await.expect("a pause");
    assert_eq!(ends.next().await, run.0);
    client.resume(run, "ops", "go on").await.expect("a resume");
    client.cancel(run, "ops", "stop").await.expect("a cancel");
    assert_eq!(
        ends.next().await,
        run.0,
        "the cancel; the resume sent nothing"
    );
    let fence = marker(&t).await;
    assert_eq!(ends.next().await, fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_cascading_to_fan_out_children_notifies_each() {
    let t = TestDb::new().await;
    let mut ends = Ends::listen(&t).await;
    let client = t.client();
    let parent = client.start::<Parent>(&()).await.expect("a start").run_id;
    // Only the parent's workflow: the children stay `ready`.
    t.db.worker()
        .notifications(false)
        .register(Parent)
        .build()
        .expect("a worker")
        .run_until_idle()
        .await
        .expect("the worker runs");
    let children: Vec<i64> = t
        .query(
            "SELECT r.id FROM {schema}.runs r JOIN {schema}.batches b ON b.id = r.parent_batch_id \
             WHERE b.run_id = $1 ORDER BY r.id",
            &[&parent.0],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(children.len(), 2);
    let child = RunId(children[0]);
    let waiting = tokio::spawn(
        client
            .result::<Child>(child)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    client
        .cancel(parent, "ops", "called off")
        .await
        .expect("a cancel");
    let mut notified = BTreeSet::new();
    for _ in 0..3 {
        notified.insert(ends.next().await);
    }
    assert_eq!(
        notified,
        BTreeSet::from([parent.0, children[0], children[1]])
    );
    let cancelled = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("the child's wait is woken")
        .expect("the wait's task");
    assert!(
        matches!(&cancelled, Err(Error::RunCancelled { reason: Some(r), .. })
            if *r == format!("parent run {parent} was cancelled")),
        "{cancelled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_sweep_pauses_is_notified() {
    let t = TestDb::new().await;
    let mut ends = Ends::listen(&t).await;
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let worker = |t: &TestDb| {
        t.db.worker()
            .notifications(false)
            .stall_action(StallAction::Pause)
            .register(Hung {
                entered: Arc::clone(&entered),
                release: Arc::clone(&release),
            })
            .build()
            .expect("a worker")
    };
    let (hanging, sweeper) = (worker(&t), worker(&t));
    let run = t.client().start::<Hung>(&()).await.expect("a start").run_id;
    let hung = tokio::spawn(async move { hanging.run_once().await.expect("the claim") });
    entered.notified().await;
    t.clock.advance(Duration::from_secs(5));
    assert_eq!(sweeper.sweep().await.expect("the sweep").repaired, 1);
    assert_eq!(ends.next().await, run.0);
    assert_eq!(t.run(run).await.run.status, RunStatus::Paused);
    release.notify_one();
    hung.await.expect("the body ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_notification_is_made_up_by_polling() {
    let t = TestDb::new().await;
    // This schema's runs end silently from now on.
    t.execute("ALTER TABLE {schema}.runs DISABLE TRIGGER runs_ended", &[])
        .await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(Duration::from_millis(100))
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    client
        .cancel(run, "ops", "quietly")
        .await
        .expect("a cancel");
    let cancelled = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("found by a poll")
        .expect("the wait's task");
    assert!(
        matches!(cancelled, Err(Error::RunCancelled { .. })),
        "{cancelled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_listener_comes_back_and_the_wait_still_ends() {
    let t = TestDb::new().await;
    let client = t.client();
    let run = client.start::<Gate>(&()).await.expect("a start").run_id;
    let other = client.start::<Gate>(&()).await.expect("a start").run_id;
    let waiting = tokio::spawn(
        client
            .result::<Gate>(run)
            .poll_interval(NEVER)
            .into_future(),
    );
    let waiting_other = tokio::spawn(
        client
            .result::<Gate>(other)
            .poll_interval(NEVER)
            .into_future(),
    );
    assert!(listening(&t, 1).await);
    let killed = listeners(&t).await[0];
    t.execute("SELECT pg_terminate_backend($1)", &[&killed])
        .await;
    // Ended while (most likely) nobody listens: the session coming back
    // wakes every wait, which reads its run again.
    client
        .cancel(run, "ops", "unheard")
        .await
        .expect("a cancel");
    let cancelled = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("found once the session is back")
        .expect("the wait's task");
    assert!(
        matches!(cancelled, Err(Error::RunCancelled { .. })),
        "{cancelled:?}"
    );
    // The session is back, under another backend, and hears the next end.
    assert!(
        eventually(BOUND, || async {
            let pids = listeners(&t).await;
            pids.len() == 1 && pids[0] != killed
        })
        .await,
        "a new session"
    );
    client
        .cancel(other, "ops", "heard")
        .await
        .expect("a cancel");
    let cancelled = tokio::time::timeout(BOUND, waiting_other)
        .await
        .expect("woken by the notification")
        .expect("the wait's task");
    assert!(
        matches!(cancelled, Err(Error::RunCancelled { .. })),
        "{cancelled:?}"
    );
}
