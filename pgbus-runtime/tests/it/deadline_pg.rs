//! Run deadlines on Postgres with a worker (issue 21): the sweep cancels a
//! run past its deadline while a body runs, and the worker's next heartbeat
//! tells the body through `cx.cancelled()`, as an operator's cancel does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StartOptions};
use tokio::sync::Notify;

use crate::pg::{TestDb, at_ms, events, steps};

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
    /// Set when the body saw its context cancelled.
    told: AtomicBool,
}

/// `hold` runs until its claim is lost or the test releases it.
struct Hold {
    gate: Arc<Gate>,
}

#[workflow(name = "deadline.hold")]
impl Hold {
    #[step]
    async fn hold(&self, cx: &mut StepCx<()>) -> StepResult {
        self.gate.entered.notify_one();
        tokio::select! {
            // Cancellation first: a body polled only after the test both
            // swept and released must still see the cancellation.
            biased;
            () = cx.cancelled() => self.gate.told.store(true, Ordering::SeqCst),
            () = self.gate.release.notified() => {}
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_sweep_cancels_a_running_body_through_cx_cancelled() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w =
        t.db.worker()
            .notifications(false)
            .register(Hold {
                gate: Arc::clone(&gate),
            })
            .build()
            .expect("worker");
    let client = t.client();
    let run = client
        .start_with::<Hold>(
            &(),
            &StartOptions::new().deadline_after(Duration::from_mins(1)),
        )
        .await
        .expect("start")
        .run_id;
    assert_eq!(t.run(run).await.deadline_at, Some(at_ms(60_000)));
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    gate.entered.notified().await;

    // Before the deadline the sweep leaves the run alone.
    assert_eq!(w.sweep().await.expect("sweep").deadlines_exceeded, 0);
    t.clock.advance(Duration::from_mins(1));
    let report = w.sweep().await.expect("sweep");
    assert_eq!(report.deadlines_exceeded, 1);
    assert_eq!(report.repaired, 0, "cancelled, not found stalled");
    assert_eq!(
        steps(&t.run(run).await),
        ["hold#1 cancelled/cancelled"],
        "the open row is cancelled at once"
    );

    // The worker learns at its heartbeat and tells the body.
    w.heartbeat().await.expect("heartbeat");
    gate.release.notify_one();
    assert_eq!(running.await.expect("join"), 1);
    assert!(
        gate.told.load(Ordering::SeqCst),
        "the body saw cx.cancelled()"
    );

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(view.deadline_at, None, "spent");
    let tail: Vec<String> = events(&view).into_iter().rev().take(3).collect();
    assert_eq!(
        tail,
        [
            "late_completion_ignored:hold#1",
            "cancelled",
            "deadline_exceeded"
        ]
    );
    let cancelled = view
        .events
        .iter()
        .find(|e| e.event == "cancelled")
        .expect("cancelled");
    assert_eq!(cancelled.actor, "deadline");
    assert_eq!(
        w.run_until_idle().await.expect("run"),
        0,
        "nothing after it"
    );
}
