//! Cancels cascading down the tree, and an attempt left open under an ended run
//! that never moves the run again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{BatchStatus, RunStatus};
use serde_json::json;

use super::{Kid, Leaf, children, named, polling};
use crate::pg::{TestDb, at_ms, events, eventually, steps};

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
            assert_eq!(batch.status, BatchStatus::Failed, "{id:?}");
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
