//! A later step reads an earlier step's output.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepStatus};

use crate::pg::{TestDb, step};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Order {
    id: i64,
    items: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Reservation {
    code: String,
    count: usize,
}

struct Outputs;

#[workflow(name = "engine.outputs", input = Order)]
impl Outputs {
    #[step]
    async fn reserve(&self, cx: &mut StepCx<Order>) -> StepResult {
        if cx.attempt() == 1 {
            // The output of an attempt that did not complete is not handed on.
            cx.output(&"stale")?;
            return Ok(Flow::reattempt(Duration::ZERO));
        }
        let reservation = Reservation {
            code: format!("R-{}", cx.input().id),
            count: cx.input().items.len(),
        };
        cx.output(&reservation)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn quiet(&self, _cx: &mut StepCx<Order>) {}

    /// Records an output, then fails; its policy skips it.
    #[step(on_exception(action = "skip"))]
    async fn fragile(&self, cx: &mut StepCx<Order>) -> StepResult {
        cx.output(&"from a failed attempt")?;
        Err(StepError::msg("fragile failed"))
    }

    #[step]
    async fn ship(&self, cx: &mut StepCx<Order>) -> StepResult {
        let reservation: Option<Reservation> = cx.output_of("reserve")?;
        let quiet: Option<String> = cx.output_of("quiet")?;
        let fragile: Option<String> = cx.output_of("fragile")?;
        let missing: Option<String> = cx.output_of("no_such_step")?;
        cx.output(&serde_json::json!({
            "shipped": reservation.map(|r| r.code),
            "quiet": quiet,
            "fragile": fragile,
            "missing": missing,
            "first_item": cx.input().items.first(),
        }))?;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_step_reads_an_earlier_steps_output() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = t.db.worker().register(Outputs).build().expect("worker");
    let order = Order {
        id: 42,
        items: vec!["book".into(), "pen".into()],
    };
    let run_id = client.start::<Outputs>(&order).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 5);

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.input, serde_json::to_value(&order).expect("json"));
    assert_eq!(
        step(&view, "reserve", 1).output,
        Some(serde_json::json!("stale"))
    );
    assert_eq!(
        step(&view, "reserve", 2).output,
        Some(serde_json::json!({"code": "R-42", "count": 2}))
    );
    assert_eq!(step(&view, "quiet", 1).output, None);
    let fragile = step(&view, "fragile", 1);
    assert_eq!(fragile.status, StepStatus::Failed);
    assert_eq!(
        fragile.output,
        Some(serde_json::json!("from a failed attempt")),
        "kept on its row"
    );
    assert_eq!(
        step(&view, "ship", 1).output,
        Some(serde_json::json!({
            "shipped": "R-42",
            "quiet": null,
            "fragile": null,
            "missing": null,
            "first_item": "book",
        }))
    );
}
