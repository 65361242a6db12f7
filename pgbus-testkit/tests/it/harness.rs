//! The step harness: one body, no store.

use pgbus_runtime::StepNotDefined;
use pgbus_runtime::prelude::*;
use pgbus_testkit::StepHarness;

struct Notify;

#[workflow(input = Vec<String>)]
impl Notify {
    #[step]
    async fn check(&self, cx: &mut StepCx<Vec<String>>) -> StepResult {
        if cx.attempt() < 2 {
            return Err(StepError::msg("first attempts fail"));
        }
        Ok(Flow::Complete)
    }

    removed_step!(old);

    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<String>>, fan: &mut FanOut) -> StepResult {
        for name in cx.input() {
            fan.start::<Notify>(&vec![name.clone()])?;
        }
        Ok(Flow::Complete)
    }
}

#[tokio::test]
async fn a_body_sees_its_attempt_and_returns_its_error_unresolved() {
    let failed = StepHarness::new(Notify).run("check", vec![]).await;
    assert_eq!(failed.result.unwrap_err().message(), "first attempts fail");
    let second = StepHarness::new(Notify)
        .attempt(2)
        .run("check", vec![])
        .await;
    assert_eq!(second.result.unwrap(), Flow::Complete);
}

#[tokio::test]
async fn a_fan_out_body_reports_its_children() {
    let run = StepHarness::new(Notify)
        .run("spread", vec!["a".into(), "b".into()])
        .await;
    let inputs: Vec<serde_json::Value> = run.children.iter().map(|c| c.input.clone()).collect();
    assert_eq!(inputs, [serde_json::json!(["a"]), serde_json::json!(["b"])]);
}

#[tokio::test]
async fn removed_and_unknown_steps_are_not_defined() {
    for step in ["old", "nope"] {
        let run = StepHarness::new(Notify).run(step, vec![]).await;
        assert!(run.result.unwrap_err().is::<StepNotDefined>(), "{step}");
    }
}
