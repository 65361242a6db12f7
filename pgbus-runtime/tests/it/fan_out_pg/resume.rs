//! A fresh batch after a failed fan_out is resumed.

use std::time::Duration;

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use super::{Kid, Leaf, children, named, polling};
use crate::pg::{TestDb, at_ms, steps};

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
