//! A batch and its children created together, the parent resumed once when the
//! last child ends (or its `on_batch_failure` applied), an empty batch, and the
//! sweep resolving what the children's own transactions missed.

use std::any::type_name;
use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{BatchStatus, FanOutFailed, MAX_DURATION_MS, RunStatus, RunView};
use serde_json::json;

use super::{Kid, Leaf, children, collect, named, polling, spread_kids};
use crate::pg::{TestDb, at_ms, events, steps, t0};

/// Fans out its kids (default `on_batch_failure`: pause), then one more step.
struct Parent;

#[workflow(name = "fan.parent", input = "Vec<Kid>")]
impl Parent {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
        spread_kids(cx, fan)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
}

struct SkipParent;

#[workflow(name = "fan.skip_parent", input = "Vec<Kid>")]
impl SkipParent {
    #[fan_out(on_batch_failure = "skip")]
    async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
        spread_kids(cx, fan)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
}

struct CancelParent;

#[workflow(name = "fan.cancel_parent", input = "Vec<Kid>")]
impl CancelParent {
    #[fan_out(on_batch_failure = "cancel")]
    async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
        spread_kids(cx, fan)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // the batch, its children, then the parent's resumption
async fn children_start_with_their_batch_and_the_last_one_resumes_the_parent_once() {
    let t = TestDb::new().await;
    let client = t.client();
    let parents_only = polling(&t.db).register(Parent).build().expect("worker");
    let kids = [Kid::Finish, Kid::Finish, Kid::Finish];
    let run = client
        .start::<Parent>(&kids.to_vec())
        .await
        .expect("start")
        .run_id;
    assert_eq!(parents_only.run_until_idle().await.expect("run"), 1);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Ready, "a waiting run is ready");
    assert_eq!(steps(&view), ["spread#1 waiting/-"]);
    let spread = &view.steps[0];
    assert_eq!(spread.waiting_for, None, "it waits for its batch");
    assert_eq!(spread.waiting_since, Some(t0()));
    assert_eq!(
        spread.scheduled_at,
        at_ms(i64::try_from(MAX_DURATION_MS).expect("fits"))
    );
    assert_eq!(view.batches.len(), 1);
    let batch = &view.batches[0];
    assert_eq!(
        (
            batch.parent_step_id,
            batch.total,
            batch.finished,
            batch.cancelled,
            batch.status.as_str(),
            batch.created_at,
            batch.resolved_at
        ),
        (spread.id, 3, 0, 0, "open", t0(), None)
    );
    let waiting = named(&view, "step_waiting");
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        waiting[0].reason.as_deref(),
        Some("a batch of 3 child runs")
    );
    assert_eq!(
        waiting[0].details,
        Some(json!({"batch_id": batch.id, "total": 3}))
    );

    let kids_started = children(&t, batch.id).await;
    assert_eq!(kids_started.len(), 3);
    for child in &kids_started {
        let view = t.run(*child).await;
        assert_eq!(view.run.workflow, "fan.leaf");
        assert_eq!(view.run.status, RunStatus::Ready);
        assert_eq!(view.parent_batch_id, Some(batch.id));
        assert_eq!(view.input, json!("Finish"));
        assert_eq!(steps(&view), ["work#1 scheduled/-"]);
        assert_eq!(events(&view), ["started"]);
        let started = &view.events[0];
        assert_eq!(started.actor, parents_only.id());
        assert_eq!(started.reason.as_deref(), Some("fan_out"));
        assert_eq!(
            started.details,
            Some(json!({"parent_run_id": run.0, "batch_id": batch.id}))
        );
    }

    // The children run; the last one wakes the parent, which completes the
    // step once and goes on.
    let worker = polling(&t.db)
        .register(Parent)
        .register(Leaf)
        .build()
        .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 3 + 1 + 1);
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:spread#1",
            "step_waiting:spread#1",
            "batch_resolved:spread#1",
            "step_started:spread#1",
            "step_completed:spread#1",
            "step_started:after#1",
            "step_completed:after#1",
            "finished",
        ]
    );
    let resolved = named(&view, "batch_resolved");
    assert_eq!(resolved[0].actor, worker.id(), "the last child's worker");
    assert_eq!(resolved[0].reason.as_deref(), Some("succeeded"));
    assert_eq!(
        resolved[0].details,
        Some(json!({"batch_id": batch.id, "total": 3, "finished": 3, "cancelled": 0}))
    );
    let batch = &view.batches[0];
    assert_eq!(
        (batch.status.as_str(), batch.finished, batch.cancelled),
        ("succeeded", 3, 0)
    );
    assert_eq!(batch.resolved_at, Some(t0()));
    for child in kids_started {
        assert_eq!(t.run(child).await.run.status, RunStatus::Finished);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // three policies side by side
async fn a_cancelled_child_fails_the_batch_with_each_on_batch_failure() {
    let t = TestDb::new().await;
    let client = t.client();
    let reports = Arc::default();
    let worker = polling(&t.db)
        .register(Parent)
        .register(SkipParent)
        .register(CancelParent)
        .register(Leaf)
        .on_error(collect(&reports))
        .build()
        .expect("worker");
    let kids = vec![Kid::Finish, Kid::Cancel, Kid::Finish];
    let pause = client.start::<Parent>(&kids).await.expect("start").run_id;
    let skip = client
        .start::<SkipParent>(&kids)
        .await
        .expect("start")
        .run_id;
    let cancel = client
        .start::<CancelParent>(&kids)
        .await
        .expect("start")
        .run_id;
    worker.run_until_idle().await.expect("run");

    let message = "fan_out step `spread`: 1 of 3 child runs were cancelled (2 finished)";
    for id in [pause, skip, cancel] {
        let view = t.run(id).await;
        let batch = &view.batches[0];
        assert_eq!(
            (
                batch.status.as_str(),
                batch.total,
                batch.finished,
                batch.cancelled
            ),
            ("failed", 3, 2, 1),
            "{id:?}"
        );
        let resolved = named(&view, "batch_resolved");
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].reason.as_deref(), Some("failed"));
        assert_eq!(
            resolved[0].details,
            Some(json!({"batch_id": batch.id, "total": 3, "finished": 2, "cancelled": 1}))
        );
        let spread = &view.steps[0];
        assert_eq!(
            spread.error_class.as_deref(),
            Some(type_name::<FanOutFailed>())
        );
        assert_eq!(spread.error_message.as_deref(), Some(message));
        let kids_started = children(&t, batch.id).await;
        let statuses: Vec<RunStatus> = {
            let mut statuses = Vec::new();
            for child in &kids_started {
                statuses.push(t.run(*child).await.run.status);
            }
            statuses
        };
        assert_eq!(
            statuses,
            [
                RunStatus::Finished,
                RunStatus::Cancelled,
                RunStatus::Finished
            ]
        );
        let gave_up = t.run(kids_started[1]).await;
        assert_eq!(
            named(&gave_up, "cancelled")[0].reason.as_deref(),
            Some("the child gave up")
        );
    }

    let view = t.run(pause).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["spread#1 failed/paused"]);
    assert_eq!(
        view.error_class.as_deref(),
        Some(type_name::<FanOutFailed>())
    );
    assert_eq!(named(&view, "paused")[0].reason.as_deref(), Some(message));

    let view = t.run(skip).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["spread#1 failed/skipped", "after#1 completed/completed"]
    );

    let view = t.run(cancel).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(steps(&view), ["spread#1 failed/cancelled"]);
    assert!(
        reports.lock().unwrap().is_empty(),
        "on_batch_failure is what the step asked for, not an error to report"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_batch_completes_at_once_without_a_batch_row() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db).register(Parent).build().expect("worker");
    let run = client
        .start::<Parent>(&Vec::new())
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(view.steps[0].waiting_since, None, "it never waited");
    assert!(view.batches.is_empty());
    assert!(named(&view, "step_waiting").is_empty());
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.batches", &[]).await,
        0
    );
    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // three parents, each child ended another way
async fn the_sweep_resolves_a_batch_whose_children_ended_behind_its_back() {
    let t = TestDb::new().await;
    let client = t.client();
    let parents_only = polling(&t.db).register(Parent).build().expect("worker");
    let two = vec![Kid::Finish, Kid::Finish];
    let done = client.start::<Parent>(&two).await.expect("start").run_id;
    let half = client.start::<Parent>(&two).await.expect("start").run_id;
    let open = client.start::<Parent>(&two).await.expect("start").run_id;
    assert_eq!(parents_only.run_until_idle().await.expect("run"), 3);
    let batch_of = |view: &RunView| view.batches[0].id;
    let done_batch = batch_of(&t.run(done).await);
    let half_batch = batch_of(&t.run(half).await);
    let open_batch = batch_of(&t.run(open).await);

    // Behind the engine's back: no transaction of theirs counted these.
    t.execute(
        "UPDATE {schema}.runs SET status = 'finished' WHERE parent_batch_id = $1",
        &[&done_batch],
    )
    .await;
    let half_kids = children(&t, half_batch).await;
    t.execute(
        "UPDATE {schema}.runs SET status = 'finished' WHERE id = $1",
        &[&half_kids[0].0],
    )
    .await;
    t.execute(
        "DELETE FROM {schema}.runs WHERE id = $1",
        &[&half_kids[1].0],
    )
    .await;
    let open_kids = children(&t, open_batch).await;
    t.execute(
        "UPDATE {schema}.runs SET status = 'finished' WHERE id = $1",
        &[&open_kids[0].0],
    )
    .await;

    t.clock.advance(Duration::from_secs(2));
    let sweeper = polling(&t.db).register(Parent).build().expect("worker");
    assert_eq!(sweeper.sweep().await.expect("sweep").batches_resolved, 2);
    assert_eq!(
        sweeper.sweep().await.expect("sweep").batches_resolved,
        0,
        "once"
    );

    let view = t.run(done).await;
    assert_eq!(steps(&view), ["spread#1 scheduled/-"], "woken");
    assert_eq!(view.steps[0].scheduled_at, at_ms(2_000));
    let batch = &view.batches[0];
    assert_eq!(
        (batch.status.as_str(), batch.finished, batch.cancelled),
        ("succeeded", 2, 0)
    );
    let resolved = named(&view, "batch_resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].actor, "sweep");
    assert_eq!(
        resolved[0].details,
        Some(json!({"batch_id": done_batch, "total": 2, "finished": 2, "cancelled": 0}))
    );
    let view = t.run(half).await;
    let batch = &view.batches[0];
    assert_eq!(
        (batch.status.as_str(), batch.finished, batch.cancelled),
        ("failed", 1, 1),
        "a missing child counts as cancelled"
    );
    let view = t.run(open).await;
    assert_eq!(steps(&view), ["spread#1 waiting/-"], "a child still runs");
    assert_eq!(view.batches[0].status, BatchStatus::Open);

    // The next claims complete the one and pause the other.
    assert_eq!(parents_only.run_until_idle().await.expect("run"), 3);
    let view = t.run(done).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 completed/completed",
            "after#1 completed/completed"
        ]
    );
    let view = t.run(half).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.steps[0].error_message.as_deref(),
        Some("fan_out step `spread`: 1 of 2 child runs were cancelled (1 finished)")
    );
    assert_eq!(t.run(open).await.steps[0].status.as_str(), "waiting");
}
