//! Fan-out on a real server: a batch and its children created together, the
//! parent resumed once when the last child ends (or its `on_batch_failure`
//! applied), an empty batch, cancels cascading down the tree, a fresh batch
//! after resume, the sweep resolving what the children's own transactions
//! missed, a batch that cannot be stored in full, 1,000 children ending at once
//! on three workers, and a parent cancelled while its tree runs.

use std::any::type_name;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    Database, Error, ErrorReport, EventView, FanOutFailed, IllegalMove, MAX_DURATION_MS, RunStatus,
    RunView, StepStalled, Unstorable, Worker,
};
use serde_json::json;

use crate::pg::{MANY_CONNECTIONS, TestDb, at_ms, deadlocks, events, eventually, steps, t0};

/// A worker of `db` that polls (most tests drive it step by step).
fn polling(db: &Database) -> pgbus_runtime::WorkerBuilder {
    db.worker().notifications(false)
}

/// The run's events named `event`.
fn named<'a>(view: &'a RunView, event: &str) -> Vec<&'a EventView> {
    view.events.iter().filter(|e| e.event == event).collect()
}

/// The children of batch `batch`, in the order they were created.
async fn children(t: &TestDb, batch: i64) -> Vec<RunId> {
    t.query(
        "SELECT id FROM {schema}.runs WHERE parent_batch_id = $1 ORDER BY id",
        &[&batch],
    )
    .await
    .iter()
    .map(|row| RunId(row.get(0)))
    .collect()
}

/// Collects what a worker's policies report.
fn collect(reports: &Arc<Mutex<Vec<ErrorReport>>>) -> impl Fn(&ErrorReport) + use<> {
    let reports = Arc::clone(reports);
    move |report| reports.lock().unwrap().push(report.clone())
}

/// What a child does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Kid {
    Finish,
    Cancel,
}

/// A child run: one step that completes, or cancels its run.
struct Leaf;

#[workflow(name = "fan.leaf", input = Kid)]
impl Leaf {
    #[step]
    async fn work(&self, cx: &mut StepCx<Kid>) -> Flow {
        match cx.input() {
            Kid::Finish => Flow::Complete,
            Kid::Cancel => Flow::cancel("the child gave up"),
        }
    }
}

/// Starts a `Leaf` for each kid of the input.
fn spread_kids(cx: &StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
    for kid in cx.input() {
        fan.start::<Leaf>(kid)?;
    }
    Ok(Flow::Complete)
}

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

/// Fans out `input` leaves.
struct Middle;

#[workflow(name = "fan.middle", input = u32)]
impl Middle {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for _ in 0..*cx.input() {
            fan.start::<Leaf>(&Kid::Finish)?;
        }
        Ok(Flow::Complete)
    }
}

/// One step, done at once.
struct Quick;

#[workflow(name = "fan.quick")]
impl Quick {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

/// Two children that fan out themselves (2 and 3 leaves) and a quick one.
struct Top;

#[workflow(name = "fan.top")]
impl Top {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Middle>(&2)?;
        fan.start::<Middle>(&3)?;
        fan.start::<Quick>(&())?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // a tree of three levels, checked level by level
async fn cancelling_a_parent_cancels_its_open_children_and_grandchildren() {
    let t = TestDb::new().await;
    let client = t.client();
    // No worker runs the leaves: they stay open.
    let worker = polling(&t.db)
        .register(Top)
        .register(Middle)
        .register(Quick)
        .build()
        .expect("worker");
    let top = client.start::<Top>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);
    let view = t.run(top).await;
    let top_batch = view.batches[0].id;
    let level_one = children(&t, top_batch).await;
    assert_eq!(level_one.len(), 3);
    let (middles, quick) = (&level_one[..2], level_one[2]);
    let mut leaves = Vec::new();
    for middle in middles {
        let view = t.run(*middle).await;
        assert_eq!(steps(&view), ["spread#1 waiting/-"]);
        leaves.extend(children(&t, view.batches[0].id).await);
    }
    assert_eq!(leaves.len(), 5);
    assert_eq!(t.run(quick).await.run.status, RunStatus::Finished);
    assert_eq!(t.run(top).await.batches[0].finished, 1);

    t.clock.advance(Duration::from_secs(1));
    let status = client
        .cancel(top, "ops", "stop it all")
        .await
        .expect("cancel");
    assert_eq!(status, RunStatus::Cancelled);

    let view = t.run(top).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(steps(&view), ["spread#1 cancelled/cancelled"]);
    let batch = &view.batches[0];
    assert_eq!(
        (
            batch.status.as_str(),
            batch.finished,
            batch.cancelled,
            batch.resolved_at
        ),
        ("failed", 1, 0, Some(at_ms(1_000))),
        "closed, keeping the count it had"
    );
    let reason = format!("parent run {} was cancelled", top.0);
    for id in middles.iter().chain(&leaves) {
        let view = t.run(*id).await;
        assert_eq!(view.run.status, RunStatus::Cancelled, "{id:?}");
        assert_eq!(view.cancelled_at, Some(at_ms(1_000)));
        let open: Vec<String> = steps(&view);
        assert!(
            open.iter().all(|s| s.ends_with("cancelled/cancelled")),
            "{id:?}: {open:?}"
        );
        let cancelled = named(&view, "cancelled");
        assert_eq!(cancelled.len(), 1, "{id:?}");
        assert_eq!(cancelled[0].actor, "ops");
        assert_eq!(cancelled[0].reason.as_deref(), Some(reason.as_str()));
        assert_eq!(cancelled[0].details, Some(json!({"cancelled_with": top.0})));
        for batch in &view.batches {
            assert_eq!(batch.status, "failed", "{id:?}");
        }
    }
    let quick_view = t.run(quick).await;
    assert_eq!(quick_view.run.status, RunStatus::Finished, "ended before");
    assert!(named(&quick_view, "cancelled").is_empty());
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.steps
             WHERE status IN ('scheduled', 'in_progress', 'waiting')",
            &[]
        )
        .await,
        0
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.batches WHERE status = 'open'",
            &[]
        )
        .await,
        0
    );

    // Nothing is left for anyone.
    let everyone = polling(&t.db)
        .register(Top)
        .register(Middle)
        .register(Quick)
        .register(Leaf)
        .build()
        .expect("worker");
    assert_eq!(everyone.run_until_idle().await.expect("run"), 0);
    assert_eq!(everyone.sweep().await.expect("sweep").batches_resolved, 0);
}

/// Its first batch has a child that cancels; a later attempt's does not.
struct SecondChance;

#[workflow(name = "fan.second_chance")]
impl SecondChance {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Leaf>(&Kid::Finish)?;
        fan.start::<Leaf>(&if cx.attempt() == 1 {
            Kid::Cancel
        } else {
            Kid::Finish
        })?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_failed_fan_out_starts_a_fresh_batch() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = polling(&t.db)
        .register(SecondChance)
        .register(Leaf)
        .build()
        .expect("worker");
    let run = client
        .start::<SecondChance>(&())
        .await
        .expect("start")
        .run_id;
    worker.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["spread#1 failed/paused"]);

    t.clock.advance(Duration::from_secs(30));
    client
        .resume(run, "ops", "try again")
        .await
        .expect("resume");
    worker.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(
        view.steps[1].waiting_since,
        Some(at_ms(30_000)),
        "the new attempt waited anew"
    );
    let batches: Vec<(i64, i32, i32, i32, &str)> = view
        .batches
        .iter()
        .map(|b| {
            (
                b.parent_step_id,
                b.total,
                b.finished,
                b.cancelled,
                b.status.as_str(),
            )
        })
        .collect();
    assert_eq!(
        batches,
        [
            (view.steps[0].id, 2, 1, 1, "failed"),
            (view.steps[1].id, 2, 2, 0, "succeeded"),
        ]
    );
    assert_eq!(named(&view, "batch_resolved").len(), 2);
    assert_eq!(children(&t, view.batches[1].id).await.len(), 2);
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL",
            &[]
        )
        .await,
        4
    );
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
    assert_eq!(view.batches[0].status, "open");

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

/// Child runs numbered by their input.
struct Numbered;

#[workflow(name = "fan.numbered", input = u32)]
impl Numbered {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

/// Fans out `Numbered` children 1 to `input`.
struct Counting;

#[workflow(name = "fan.counting", input = u32)]
impl Counting {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for i in 1..=*cx.input() {
            fan.start::<Numbered>(&i)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_database_refuses_in_part_leaves_nothing_and_pauses_the_run() {
    let t = TestDb::new().await;
    let client = t.client();
    t.execute(
        "CREATE FUNCTION {schema}.refuse_child_three() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.parent_batch_id IS NOT NULL AND NEW.input = '3'::jsonb THEN
                 RAISE EXCEPTION 'child 3 refused';
             END IF;
             RETURN NEW;
         END $$",
        &[],
    )
    .await;
    t.execute(
        "CREATE TRIGGER refuse_child_three BEFORE INSERT ON {schema}.runs
         FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_child_three()",
        &[],
    )
    .await;
    let reports = Arc::default();
    let worker = polling(&t.db)
        .register(Counting)
        .register(Numbered)
        .on_error(collect(&reports))
        .build()
        .expect("worker");
    let run = client.start::<Counting>(&5).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "paused, not crash-looping"
    );

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["spread#1 failed/paused"]);
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<Unstorable>())
    );
    let message = view.steps[0].error_message.clone().unwrap_or_default();
    assert!(message.contains("child 3 refused"), "{message}");
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:spread#1",
            "step_failed:spread#1",
            "paused"
        ]
    );
    assert!(view.batches.is_empty());
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.batches", &[]).await,
        0
    );
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.runs", &[]).await,
        1,
        "no child of the batch"
    );
    assert_eq!(t.count("SELECT count(*) FROM {schema}.steps", &[]).await, 1);
    let reported: Vec<String> = reports
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.class.clone())
        .collect();
    assert_eq!(reported, [type_name::<Unstorable>()]);

    // Once the database takes it, a resume starts the whole batch.
    t.execute("DROP TRIGGER refuse_child_three ON {schema}.runs", &[])
        .await;
    client.resume(run, "ops", "fixed").await.expect("resume");
    worker.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.batches.len(), 1);
    assert_eq!((view.batches[0].total, view.batches[0].finished), (5, 5));
}

/// Fans out `input` numbered children, then counts how often its next step ran.
struct Wide {
    afters: Arc<AtomicU32>,
}

#[workflow(name = "fan.wide", input = u32)]
impl Wide {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for i in 0..*cx.input() {
            fan.start::<Numbered>(&i)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u32>) {
        self.afters.fetch_add(1, Ordering::SeqCst);
    }
}

/// Three workers, until `stopped` says stop. They share one pool apart from
/// the test's (each has its own upkeep connections): three pools of sixteen
/// would take most of the server's `max_connections` from the tests running
/// beside this one.
async fn three_workers(
    t: &TestDb,
    stopped: &tokio::sync::watch::Receiver<bool>,
    build: impl Fn(pgbus_runtime::WorkerBuilder) -> Worker,
) -> tokio::task::JoinSet<()> {
    let mut workers = tokio::task::JoinSet::new();
    let shared = t.second_connection().await;
    for _ in 0..3 {
        let db = shared.clone();
        let worker = build(
            db.worker()
                .concurrency(32)
                .poll_interval(Duration::from_millis(100)),
        );
        let mut stopped = stopped.clone();
        workers.spawn(async move {
            worker
                .run_until(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await
                .expect("worker loop");
            drop(worker);
            // Closing the pool ends its backends, which report their
            // statistics (the deadlock count) as they exit.
            drop(db);
        });
    }
    workers
}

const WIDE: u32 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(clippy::too_many_lines)] // setup, the race and its checks
async fn a_thousand_children_ending_at_once_on_three_workers_resume_the_parent_once() {
    let _many = MANY_CONNECTIONS.lock().await;
    let t = TestDb::new().await;
    let client = t.client();
    let deadlocks_before = deadlocks(&t).await;
    let afters = Arc::new(AtomicU32::new(0));
    let reports = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let began = Instant::now();
    let mut workers = three_workers(&t, &stopped, |builder| {
        builder
            .register(Wide {
                afters: Arc::clone(&afters),
            })
            .register(Numbered)
            .on_error(collect(&reports))
            .build()
            .expect("worker")
    })
    .await;
    let run = client.start::<Wide>(&WIDE).await.expect("start").run_id;
    let finished = eventually(Duration::from_mins(2), || async {
        t.run(run).await.run.status == RunStatus::Finished
    })
    .await;
    let took = began.elapsed();
    stop.send(true).expect("stop");
    while let Some(joined) = workers.join_next().await {
        joined.expect("join");
    }
    eprintln!("{WIDE} children on three workers: the parent finished after {took:?}");
    assert!(finished, "the parent did not finish in time");

    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        [
            "spread#1 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(afters.load(Ordering::SeqCst), 1, "the next step ran once");
    assert_eq!(named(&view, "batch_resolved").len(), 1);
    assert_eq!(
        events(&view)
            .iter()
            .filter(|e| *e == "step_started:spread#1")
            .count(),
        2,
        "claimed to start the batch and once more to complete"
    );
    assert_eq!(named(&view, "step_completed").len(), 2);
    let batch = &view.batches[0];
    let total = i32::try_from(WIDE).expect("fits");
    assert_eq!(
        (
            batch.status.as_str(),
            batch.total,
            batch.finished,
            batch.cancelled
        ),
        ("succeeded", total, total, 0)
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id = $1 AND status = 'finished'",
            &[&batch.id]
        )
        .await,
        i64::from(WIDE)
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[]
        )
        .await,
        0
    );
    assert!(reports.lock().unwrap().is_empty());
    assert_eq!(
        deadlocks(&t).await,
        deadlocks_before,
        "deadlocks in the database while the children ended"
    );
}

/// Three trivial steps: a leaf that commits a transition after every step.
struct Three;

#[workflow(name = "fan.three")]
impl Three {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn three(&self, _cx: &mut StepCx<()>) {}
}

/// Fans out `input` `Three` leaves.
struct Branch;

#[workflow(name = "fan.branch", input = u32)]
impl Branch {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for _ in 0..*cx.input() {
            fan.start::<Three>(&())?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u32>) {}
}

/// Fans out `input.0` branches of `input.1` leaves each.
struct Tree;

#[workflow(name = "fan.tree", input = "(u32, u32)")]
impl Tree {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<(u32, u32)>, fan: &mut FanOut) -> StepResult {
        let (branches, leaves) = *cx.input();
        for _ in 0..branches {
            fan.start::<Branch>(&leaves)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<(u32, u32)>) {}
}

const ROUNDS: u32 = 12;
const LEAF_STEPS: i64 = 4 * 10 * 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(clippy::too_many_lines)] // the rounds and the checks of the whole schema
async fn cancelling_a_parent_while_its_tree_runs_leaves_every_batch_consistent() {
    let _many = MANY_CONNECTIONS.lock().await;
    let t = TestDb::new().await;
    let client = t.client();
    let deadlocks_before = deadlocks(&t).await;
    let reports = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let began = Instant::now();
    let mut workers = three_workers(&t, &stopped, |builder| {
        builder
            .register(Tree)
            .register(Branch)
            .register(Three)
            .on_error(collect(&reports))
            .build()
            .expect("worker")
    })
    .await;
    let leaf_steps_done =
        "SELECT count(*) FROM {schema}.steps WHERE workflow = 'fan.three' AND status = 'completed'";
    let moving = "SELECT (SELECT count(*) FROM {schema}.runs
                          WHERE status NOT IN ('finished', 'cancelled'))
                       + (SELECT count(*) FROM {schema}.steps WHERE status = 'in_progress')";
    let open_steps_of_ended_runs = "SELECT count(*) FROM {schema}.steps s
                                    JOIN {schema}.runs r ON r.id = s.run_id
                                    WHERE r.status IN ('finished', 'cancelled')
                                      AND s.status IN ('scheduled', 'in_progress', 'waiting')";
    let (mut cancelled, mut too_late) = (0, 0);
    for round in 0..ROUNDS {
        let before = t.count(leaf_steps_done, &[]).await;
        let top = client.start::<Tree>(&(4, 10)).await.expect("start").run_id;
        // Cancel once this many leaf steps of the round completed.
        let at = i64::from(round) * LEAF_STEPS / i64::from(ROUNDS);
        let deadline = Instant::now() + Duration::from_secs(30);
        while t.count(leaf_steps_done, &[]).await - before < at && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        match client.cancel(top, "ops", "race").await {
            Ok(RunStatus::Cancelled) => cancelled += 1,
            Err(Error::IllegalMove {
                why: IllegalMove::Ended { .. },
                ..
            }) => too_late += 1,
            other => panic!("round {round}: {other:?}"),
        }
        // The cancel closed every open step of the tree with its runs, in its
        // own transaction: none is left for a worker to finish afterwards.
        let open_under_cancelled = t.count(open_steps_of_ended_runs, &[]).await;
        assert_eq!(
            open_under_cancelled, 0,
            "round {round}: cancelled runs with steps still open right after the cancel"
        );
        // Until the tree stands still: every run ended, no body running.
        let settled = eventually(Duration::from_secs(30), || async {
            t.count(moving, &[]).await == 0
        })
        .await;
        assert!(settled, "round {round}: the tree did not settle");
    }
    let took = began.elapsed();
    stop.send(true).expect("stop");
    while let Some(joined) = workers.join_next().await {
        joined.expect("join");
    }
    eprintln!(
        "{ROUNDS} trees cancelled while running: {cancelled} cancelled, {too_late} had \
         finished first, in {took:?}"
    );
    assert!(cancelled > ROUNDS / 2, "the cancels raced nothing");

    assert_eq!(
        t.count(open_steps_of_ended_runs, &[]).await,
        0,
        "an ended run with a step still open"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events e
             WHERE e.event = 'finished'
               AND EXISTS (SELECT 1 FROM {schema}.events c
                           WHERE c.run_id = e.run_id AND c.event = 'cancelled')",
            &[]
        )
        .await,
        0,
        "a cancelled run that finished afterwards"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.batches WHERE status = 'open'",
            &[]
        )
        .await,
        0
    );
    let disagreeing: Vec<String> = t
        .query(
            "SELECT format('batch %s of run %s (%s, %s): %s/%s/%s of %s, children %s',
                           b.id, b.run_id, p.workflow, p.status, b.status, b.succeeded,
                           b.failed, b.total,
                           (SELECT string_agg(c.status, ',' ORDER BY c.id)
                            FROM {schema}.runs c WHERE c.parent_batch_id = b.id))
             FROM {schema}.batches b JOIN {schema}.runs p ON p.id = b.run_id
             WHERE b.succeeded <> (SELECT count(*) FROM {schema}.runs c
                                   WHERE c.parent_batch_id = b.id AND c.status = 'finished')
                OR b.failed <> 0
                OR (b.status = 'succeeded') <> (b.succeeded = b.total)",
            &[],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        disagreeing.is_empty(),
        "batches whose counts disagree with their children: {disagreeing:#?}"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs p
             JOIN {schema}.batches b ON b.run_id = p.id
             WHERE p.status = 'cancelled' AND b.status = 'succeeded'
               AND EXISTS (SELECT 1 FROM {schema}.runs c
                           WHERE c.parent_batch_id = b.id AND c.status = 'cancelled')",
            &[]
        )
        .await,
        0
    );
    let sweeper = polling(&t.db).register(Tree).build().expect("worker");
    assert_eq!(sweeper.sweep().await.expect("sweep").batches_resolved, 0);
    let reports = reports.lock().unwrap().clone();
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(
        deadlocks(&t).await,
        deadlocks_before,
        "deadlocks in the database during the races"
    );
}

/// Bodies that wait for the test's permit: one plain step, one fan_out.
struct Held {
    entered: Arc<AtomicU32>,
    release: Arc<tokio::sync::Semaphore>,
}

impl Held {
    async fn hold(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        self.release.acquire().await.expect("open").forget();
    }
}

#[workflow(name = "fan.held")]
impl Held {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {
        self.hold().await;
    }
}

struct HeldFan {
    held: Held,
}

#[workflow(name = "fan.held_fan")]
impl HeldFan {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        self.held.hold().await;
        fan.start::<Leaf>(&Kid::Finish)?;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_left_open_under_an_ended_run_never_moves_the_run_again() {
    let t = TestDb::new().await;
    let client = t.client();
    let entered = Arc::new(AtomicU32::new(0));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let held = || Held {
        entered: Arc::clone(&entered),
        release: Arc::clone(&release),
    };
    let worker = polling(&t.db)
        .register(held())
        .register(HeldFan { held: held() })
        .register(Leaf)
        .build()
        .expect("worker");
    let plain = client.start::<Held>(&()).await.expect("start").run_id;
    let fan = client.start::<HeldFan>(&()).await.expect("start").run_id;
    let running = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run_once().await.expect("run") })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            entered.load(Ordering::SeqCst) == 2
        })
        .await
    );
    // What a cascade that missed a step would leave: the runs ended, their
    // attempts still in progress.
    t.execute(
        "UPDATE {schema}.runs SET status = 'cancelled' WHERE id = ANY($1)",
        &[&vec![plain.0, fan.0]],
    )
    .await;
    release.add_permits(2);
    assert_eq!(running.await.expect("join"), 2);

    for (id, step) in [(plain, "only#1"), (fan, "spread#1")] {
        let view = t.run(id).await;
        assert_eq!(view.run.status, RunStatus::Cancelled, "{step}");
        assert_eq!(steps(&view), [format!("{step} cancelled/cancelled")]);
        assert_eq!(
            events(&view).last().map(String::as_str),
            Some(format!("late_completion_ignored:{step}").as_str())
        );
        assert!(named(&view, "finished").is_empty());
        assert!(view.batches.is_empty(), "{step}: no batch for an ended run");
    }
    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 2);
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
}

// ---- a parent's claim lost with its worker ---------------------------------------

/// What each body of `Recount` ran for: its run and attempt.
type Bodies = Arc<Mutex<Vec<(RunId, u32)>>>;

/// Fans out its input's kids on its first attempt (only finishing ones on a
/// later attempt), recording each time its body runs; then one more step.
struct Recount {
    bodies: Bodies,
}

#[workflow(name = "fan.recount", input = "Vec<Kid>")]
impl Recount {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
        self.bodies
            .lock()
            .unwrap()
            .push((cx.run_id(), cx.attempt()));
        for kid in cx.input() {
            fan.start::<Leaf>(if cx.attempt() == 1 { kid } else { &Kid::Finish })?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
}

/// The worker id [`claim_and_die`] claims under: it never registered, so it
/// never heartbeats.
const DEAD_WORKER: &str = "dead-worker";

/// What a worker that claims `run`'s due `step` row and dies at once leaves
/// behind, as claim.sql writes it: the row in progress under a worker that
/// never heartbeats, the run performing, a `step_started` event. Returns the
/// row's id.
async fn claim_and_die(t: &TestDb, run: RunId, step: &str) -> i64 {
    let now = t.clock.now();
    let rows = t
        .query(
            "WITH claimed AS (
                 UPDATE {schema}.steps
                 SET status = 'in_progress', started_at = $1, worker_id = $4,
                     stall_at = $1 + interval '5 minutes'
                 WHERE run_id = $2 AND step_name = $3
                   AND status IN ('scheduled', 'waiting') AND scheduled_at <= $1
                 RETURNING id, run_id, step_name, attempt
             ), moved AS (
                 UPDATE {schema}.runs r SET status = 'performing', updated_at = $1
                 FROM claimed c
                 WHERE r.id = c.run_id AND r.status = 'ready'
                 RETURNING r.id
             ), started AS (
                 INSERT INTO {schema}.events
                     (run_id, step_id, step_name, attempt, event, actor, created_at)
                 SELECT run_id, id, step_name, attempt, 'step_started', $4, $1 FROM claimed
                 RETURNING id
             )
             SELECT c.id, (SELECT count(*) FROM moved) FROM claimed c",
            &[&now, &run.0, &step, &DEAD_WORKER],
        )
        .await;
    assert_eq!(rows.len(), 1, "one due row of `{step}` to claim");
    assert_eq!(rows[0].get::<_, i64>(1), 1, "the run was ready");
    rows[0].get(0)
}

/// Past the lost-worker threshold, the sweep takes the dead worker's attempts
/// of `runs` as stalled and pauses those runs (`StepStalled`); then an
/// operator resumes each.
async fn sweep_and_resume(t: &TestDb, sweeper: &Worker, runs: &[RunId]) {
    t.clock.advance(Duration::from_secs(31));
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, runs.len());
    for run in runs {
        let view = t.run(*run).await;
        assert_eq!(view.run.status, RunStatus::Paused);
        let stalled = named(&view, "stall_detected");
        assert_eq!(stalled.len(), 1);
        assert_eq!(stalled[0].reason.as_deref(), Some("worker_lost"));
        assert_eq!(stalled[0].attempt, Some(1));
        assert_eq!(
            view.error_class.as_deref(),
            Some(type_name::<StepStalled>())
        );
        assert_eq!(
            t.client()
                .resume(*run, "ops", "the worker is gone")
                .await
                .expect("resume"),
            RunStatus::Ready
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // two parents, each through crash, sweep and resume
async fn a_crash_after_the_batch_resolved_starts_no_second_batch_but_a_failed_one_does() {
    let t = TestDb::new().await;
    let client = t.client();
    let bodies: Bodies = Arc::default();
    let parents = polling(&t.db)
        .register(Recount {
            bodies: Arc::clone(&bodies),
        })
        .build()
        .expect("worker");
    let leaves = polling(&t.db).register(Leaf).build().expect("worker");
    let succeeded = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Finish])
        .await
        .expect("start")
        .run_id;
    let failed = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Cancel])
        .await
        .expect("start")
        .run_id;
    assert_eq!(parents.run_until_idle().await.expect("run"), 2, "both park");
    assert_eq!(leaves.run_until_idle().await.expect("run"), 4);
    for (run, status) in [(succeeded, "succeeded"), (failed, "failed")] {
        let view = t.run(run).await;
        assert_eq!(steps(&view), ["spread#1 scheduled/-"], "woken by its batch");
        assert_eq!(view.batches[0].status, status);
        // The wake's claim is taken by a worker that dies at once.
        let row = claim_and_die(&t, run, "spread").await;
        assert_eq!(row, view.steps[0].id);
    }
    assert_eq!(parents.run_until_idle().await.expect("run"), 0);
    sweep_and_resume(&t, &parents, &[succeeded, failed]).await;
    t.clock.advance(Duration::from_secs(1));
    // `succeeded`: its batch decides (the step completes) and `after`;
    // `failed`: a fresh batch is started and parks.
    assert_eq!(parents.run_until_idle().await.expect("run"), 3);
    assert_eq!(leaves.run_until_idle().await.expect("run"), 2);
    assert_eq!(parents.run_until_idle().await.expect("run"), 2);

    // The resolved batch is not started again: one batch, its two children,
    // and the body ran once.
    let view = t.run(succeeded).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<StepStalled>())
    );
    assert_eq!(view.batches.len(), 1, "no second batch");
    assert_eq!(
        (
            view.batches[0].parent_step_id,
            view.batches[0].status.as_str()
        ),
        (view.steps[0].id, "succeeded")
    );
    assert_eq!(children(&t, view.batches[0].id).await.len(), 2);
    assert_eq!(named(&view, "batch_resolved").len(), 1);
    assert_eq!(
        bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|(run, _)| *run == succeeded)
            .count(),
        1,
        "the body ran once"
    );

    // The failed batch is not taken over: the resumed attempt starts a fresh one.
    let view = t.run(failed).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    let batches: Vec<(i64, &str)> = view
        .batches
        .iter()
        .map(|b| (b.parent_step_id, b.status.as_str()))
        .collect();
    assert_eq!(
        batches,
        [
            (view.steps[0].id, "failed"),
            (view.steps[1].id, "succeeded")
        ]
    );
    assert_eq!(children(&t, view.batches[1].id).await.len(), 2);
    let ran: Vec<u32> = bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|(run, _)| *run == failed)
        .map(|(_, attempt)| *attempt)
        .collect();
    assert_eq!(ran, [1, 2]);
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL",
            &[]
        )
        .await,
        2 + 2 + 2
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[]
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // the takeover, then the batch resolving into the new row
async fn a_new_attempt_takes_over_the_batch_still_open_and_its_last_child_wakes_it() {
    let t = TestDb::new().await;
    let client = t.client();
    let bodies: Bodies = Arc::default();
    // Finished children are kept however far the clock goes.
    let parents = polling(&t.db)
        .retention(None)
        .register(Recount {
            bodies: Arc::clone(&bodies),
        })
        .build()
        .expect("worker");
    let one_leaf = polling(&t.db)
        .concurrency(1)
        .register(Leaf)
        .build()
        .expect("worker");
    let run = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Finish])
        .await
        .expect("start")
        .run_id;
    assert_eq!(parents.run_until_idle().await.expect("run"), 1, "parks");
    assert_eq!(one_leaf.run_once().await.expect("run"), 1, "one child ends");
    let view = t.run(run).await;
    let first = view.steps[0].id;
    assert_eq!(
        (view.batches[0].finished, view.batches[0].status.as_str()),
        (1, "open")
    );

    // The parked row comes due at the end of its longest wait while a child
    // still runs; a worker claims it and dies.
    t.clock
        .advance(Duration::from_millis(MAX_DURATION_MS) + Duration::from_secs(1));
    assert_eq!(claim_and_die(&t, run, "spread").await, first);
    sweep_and_resume(&t, &parents, &[run]).await;
    let view = t.run(run).await;
    assert_eq!(
        view.batches[0].status, "open",
        "the sweep left the batch be"
    );

    // The resumed attempt does not run the body: it takes the open batch over
    // and waits for it.
    assert_eq!(parents.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        ["spread#1 failed/paused", "spread#2 waiting/-"]
    );
    let second = view.steps[1].id;
    assert_eq!(view.batches.len(), 1, "no second batch");
    assert_eq!(
        view.batches[0].parent_step_id, second,
        "the batch now wakes the new attempt"
    );
    assert_eq!(view.batches[0].status, "open");
    assert_eq!(bodies.lock().unwrap().len(), 1, "the body ran once");

    // The last child ends: the batch resolves and wakes the new row.
    assert_eq!(one_leaf.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        ["spread#1 failed/paused", "spread#2 scheduled/-"]
    );
    let resolved = named(&view, "batch_resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].step_id, Some(second));
    assert_eq!(resolved[0].attempt, Some(2));
    assert_eq!(parents.run_until_idle().await.expect("run"), 2);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(view.batches.len(), 1);
    assert_eq!(
        (
            view.batches[0].parent_step_id,
            view.batches[0].status.as_str(),
            view.batches[0].finished
        ),
        (second, "succeeded", 2)
    );
    assert_eq!(children(&t, view.batches[0].id).await.len(), 2);
    assert_eq!(bodies.lock().unwrap().len(), 1, "the body ran once");
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.runs", &[]).await,
        1 + 2
    );
}
