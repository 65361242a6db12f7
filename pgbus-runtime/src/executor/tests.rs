//! The fan_out children an attempt starts, placed under a deployment's
//! overrides; an override that does not fit a child's workflow fails the
//! attempt with the refusal, under the step's exception policies.

use super::*;
use crate::overrides::OverrideRefused;
use crate::prelude::*;

struct Kid;

#[workflow(name = "executor.kid", input = u32)]
impl Kid {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

struct Parent;

#[workflow(name = "executor.parent")]
impl Parent {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Kid>(&1)?;
        fan.start::<Kid>(&2)?;
        Ok(Flow::Complete)
    }
}

/// A parent whose policy cancels the run on a refused override.
struct Careful;

#[workflow(
    name = "executor.careful",
    on_exception(matching(OverrideRefused), action = "cancel")
)]
impl Careful {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Kid>(&1)?;
        Ok(Flow::Complete)
    }
}

async fn spread<W: Workflow>(workflow: &W, overrides: &Overrides) -> AttemptResult {
    let input = AttemptInput::new(RunId(1), "spread", 1);
    run_attempt_under(workflow, W::DEFINITION, input, || None, overrides).await
}

fn children(result: &AttemptResult) -> &[ChildRun] {
    match &result.park {
        Some(Park::Batch { children }) => children,
        other => panic!("not a batch: {other:?} ({result:?})"),
    }
}

#[tokio::test]
async fn children_start_as_the_overrides_place_them() {
    let plain = spread(&Parent, &Overrides::new()).await;
    assert!(
        children(&plain)
            .iter()
            .all(|child| std::ptr::eq(child.definition, Kid::DEFINITION)),
        "without overrides, as the source declares"
    );

    let kids = Overrides::new().workflow("executor.kid", |w| w.queue("kids").priority(3));
    let result = spread(&Parent, &kids).await;
    assert_eq!(result.error, None);
    let placed = children(&result);
    assert_eq!(placed.len(), 2);
    for child in placed {
        assert_eq!(
            (child.definition.queue, child.definition.priority),
            ("kids", 3)
        );
        assert_eq!(child.definition.digest, Kid::DEFINITION.digest);
        assert_ne!(
            child.definition.options_digest,
            Kid::DEFINITION.options_digest
        );
    }

    // Overrides of other workflows only: the children as their source says.
    let others = Overrides::new().workflow("executor.other", |w| w.queue("elsewhere"));
    let result = spread(&Parent, &others).await;
    assert!(
        children(&result)
            .iter()
            .all(|child| std::ptr::eq(child.definition, Kid::DEFINITION))
    );
}

#[tokio::test]
async fn an_override_that_does_not_fit_a_child_pauses_the_run_and_starts_none() {
    let ghost = Overrides::new()
        .workflow("executor.kid", |w| w.queue("kids"))
        .step("executor.kid", "ghost", |s| s.wait("1s"));
    let result = spread(&Parent, &ghost).await;
    assert_eq!(result.park, None, "no child starts");
    let error = result.error.clone().expect("the attempt failed");
    assert_eq!(error.class, "pgbus_runtime::overrides::OverrideRefused");
    assert!(
        error
            .message
            .starts_with("override of workflow `executor.kid`, step `ghost` refused: this workflow has no step `ghost`"),
        "{}",
        error.message
    );
    assert_eq!(
        result.verb,
        Verb::Pause {
            reason: format!("step failed: {}", error.message)
        },
        "the default policy: pause"
    );
    assert!(result.report, "reported, as a failed step is");
}

#[tokio::test]
async fn the_steps_policies_decide_what_a_refused_child_does() {
    let ghost = Overrides::new().step("executor.kid", "ghost", |s| s.wait("1s"));
    let result = spread(&Careful, &ghost).await;
    assert_eq!(result.park, None);
    assert!(
        matches!(&result.verb, Verb::Cancel { reason } if reason.contains("step `ghost` refused")),
        "{:?}",
        result.verb
    );
}

struct Sibling;

#[workflow(name = "executor.sibling", input = u32)]
impl Sibling {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

/// A batch of two workflows, interleaved.
struct Mixed;

#[workflow(name = "executor.mixed")]
impl Mixed {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Kid>(&1)?;
        fan.start::<Kid>(&2)?;
        fan.start::<Sibling>(&3)?;
        fan.start::<Kid>(&4)?;
        Ok(Flow::Complete)
    }
}

#[tokio::test]
async fn each_child_of_a_mixed_batch_is_placed_by_its_own_workflow() {
    let overrides = Overrides::new().workflow("executor.kid", |w| w.queue("kids"));
    let result = spread(&Mixed, &overrides).await;
    assert_eq!(result.error, None);
    let placed: Vec<(&str, &str)> = children(&result)
        .iter()
        .map(|child| (child.definition.name, child.definition.queue))
        .collect();
    assert_eq!(
        placed,
        [
            ("executor.kid", "kids"),
            ("executor.kid", "kids"),
            ("executor.sibling", Sibling::DEFINITION.queue),
            ("executor.kid", "kids"),
        ]
    );
}
