//! What a fresh user's review threw at the worker: data the driver cannot read
//! back, errors whose `Display` fails. Each must end as a step error for the
//! policies, never as a panic or a stuck row.

use std::fmt;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus};
use serde_json::Value;

use crate::pg::TestDb;

fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::from(0), |inner, _| Value::Array(vec![inner]))
}

struct Deep;

#[workflow(name = "robust.deep", input = u8)]
impl Deep {
    #[step]
    async fn produce(&self, cx: &mut StepCx<u8>) -> StepResult {
        if *cx.input() == 1 {
            cx.output(&nested(300))?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn consume(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_the_driver_cannot_read_back_pauses_the_run_and_nothing_else() {
    let t = TestDb::new().await;
    let client = t.client();
    let deep = client.start::<Deep>(&1).await.expect("start").run_id;
    let plain = client.start::<Deep>(&2).await.expect("start").run_id;
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Deep)
            .build()
            .expect("worker");

    worker.run_until_idle().await.expect("the worker survives");

    let sql = "SELECT status, coalesce(error_class, '') FROM {schema}.runs WHERE id = $1";
    let deep_row = t.query(sql, &[&deep.0]).await;
    assert_eq!(
        deep_row[0].get::<_, String>(0),
        "paused",
        "the next claim could not read the outputs"
    );
    assert!(deep_row[0].get::<_, String>(1).ends_with("Unstorable"));
    let plain_row = t.query(sql, &[&plain.0]).await;
    assert_eq!(
        plain_row[0].get::<_, String>(0),
        "finished",
        "other runs go on"
    );
    // Reading the run back is a typed error, not a panic.
    assert!(matches!(client.run(deep).await, Err(Error::Corrupt(_))));
    assert_eq!(t.run(plain).await.run.status, RunStatus::Finished);
}

#[derive(Debug)]
struct BadDisplay;

impl fmt::Display for BadDisplay {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Err(fmt::Error)
    }
}

impl std::error::Error for BadDisplay {}

struct Rude;

#[workflow(name = "robust.rude")]
impl Rude {
    #[step(on_exception(action = "skip"))]
    async fn fail(&self, _cx: &mut StepCx<()>) -> Result<(), BadDisplay> {
        Err(BadDisplay)
    }
}

#[tokio::test]
async fn an_error_whose_display_fails_is_still_recorded() {
    let t = TestDb::new().await;
    let run = t.client().start::<Rude>(&()).await.expect("start").run_id;
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Rude)
            .build()
            .expect("worker");
    worker.run_until_idle().await.expect("run");
    let view = t.run(run).await;
    assert_eq!(
        view.run.status,
        RunStatus::Finished,
        "skipped by its policy"
    );
    assert_eq!(
        view.steps[0].error_message.as_deref(),
        Some("<the error's Display implementation failed>")
    );
}
