//! A batch the database refuses in part leaves nothing and pauses the run.

use std::any::type_name;
use std::sync::Arc;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, Unstorable};

use super::{Numbered, collect, polling};
use crate::pg::{TestDb, events, steps};

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
