//! A wait counts from the end of the previous step, on the database clock.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ManualClock, RunStatus, StepStatus};

use crate::pg::{TestDb, at_ms, step, t0};

/// Its first step takes two seconds on the pinned clock; its second waits five
/// after that.
struct Waits {
    clock: ManualClock,
}

#[workflow(name = "engine.waits")]
impl Waits {
    #[step(wait = "1s")]
    async fn first(&self, _cx: &mut StepCx<()>) {
        self.clock.advance(Duration::from_secs(2));
    }

    #[step(wait = "5s")]
    async fn second(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_counts_from_the_end_of_the_previous_step_on_the_database_clock() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(Waits {
                clock: t.clock.clone(),
            })
            .build()
            .expect("worker");
    let run_id = client.start::<Waits>(&()).await.expect("start").run_id;

    // The first step's own wait counts from the start.
    let view = t.run(run_id).await;
    assert_eq!(view.run.created_at, t0());
    assert_eq!(step(&view, "first", 1).scheduled_at, at_ms(1_000));
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    t.clock.advance(Duration::from_millis(999));
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.run_once().await.expect("run"), 1);

    let view = t.run(run_id).await;
    let first = step(&view, "first", 1);
    assert_eq!(first.started_at, Some(at_ms(1_000)));
    assert_eq!(first.finished_at, Some(at_ms(3_000)), "the body took 2 s");
    let second = step(&view, "second", 1);
    assert_eq!(second.status, StepStatus::Scheduled);
    assert_eq!(
        second.scheduled_at,
        at_ms(8_000),
        "5 s after the first ended, not after it started"
    );
    assert_eq!(view.run.status, RunStatus::Ready);
    assert_eq!(view.run.current_step.as_deref(), Some("second"));

    t.clock.advance(Duration::from_millis(4_999));
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "not due yet"
    );
    assert_eq!(
        step(&t.run(run_id).await, "second", 1).status,
        StepStatus::Scheduled
    );
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);

    let view = t.run(run_id).await;
    let second = step(&view, "second", 1);
    assert_eq!(second.started_at, Some(at_ms(8_000)));
    assert_eq!(second.queued(), Some(chrono::Duration::zero()));
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.run.finished_at, Some(at_ms(8_000)));
}
