//! An input that does not deserialize is a step error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use crate::pg::{TestDb, events, step, steps};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Typed {
    count: u32,
}

struct BadInputPauses {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.bad_input.pause", input = Typed)]
impl BadInputPauses {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Typed>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

struct BadInputCancels {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.bad_input.cancel", input = Typed)]
#[on_exception(matching(pgbus_runtime::BadInput), action = "cancel")]
impl BadInputCancels {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Typed>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_that_does_not_deserialize_is_a_step_error() {
    let t = TestDb::new().await;
    let client = t.client();
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(BadInputPauses {
                calls: Arc::clone(&calls),
            })
            .register(BadInputCancels {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    let paused = client
        .start::<BadInputPauses>(&Typed { count: 1 })
        .await
        .expect("start")
        .run_id;
    let cancelled = client
        .start::<BadInputCancels>(&Typed { count: 1 })
        .await
        .expect("start")
        .run_id;
    // What another program (or a hand edit) could leave in the column.
    t.execute(
        r#"UPDATE {schema}.runs SET input = '{"count": "many"}'"#,
        &[],
    )
    .await;

    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    let view = t.run(paused).await;
    assert_eq!(view.run.status, RunStatus::Paused, "the default policy");
    assert_eq!(steps(&view), ["only#1 failed/paused"]);
    let row = step(&view, "only", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::BadInput")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("the run's input is not a valid `Typed`")
    );
    assert_eq!(row.error_causes.len(), 1);
    assert!(
        row.error_causes[0].contains("invalid type"),
        "{:?}",
        row.error_causes
    );

    let view = t.run(cancelled).await;
    assert_eq!(
        view.run.status,
        RunStatus::Cancelled,
        "the workflow's policy"
    );
    assert_eq!(steps(&view), ["only#1 failed/cancelled"]);
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:only#1",
            "step_failed:only#1",
            "cancelled:only#1"
        ]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");

    // The worker lives on: a good run still runs.
    let good = client
        .start::<BadInputPauses>(&Typed { count: 2 })
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(t.run(good).await.run.status, RunStatus::Finished);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
