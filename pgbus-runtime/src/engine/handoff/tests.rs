//! The eager handoff never bypasses a flow limit.

use super::*;
use crate::definition::{Entry, EntryKind, FlowControl, Rate, StepOptions};
use crate::engine::{StepOutcome, step_plan};
use crate::prelude::*;

struct Two;

#[workflow(name = "handoff.two")]
impl Two {
    #[step]
    async fn first(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<()>) {}
}

/// `Two` with a per-key concurrency limit.
static KEYED: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    },
    ..*<Two as crate::Workflow>::DEFINITION
};

const fn plain_step(name: &'static str, rate_limit: Option<Rate>) -> Entry {
    Entry {
        name,
        method: Some(name),
        kind: EntryKind::Step,
        options: StepOptions {
            wait_ms: 0,
            timeout_ms: None,
            skip_if: None,
            queue: None,
            priority: None,
            wait_for: None,
            on_batch_failure: None,
            on_exception: &[],
            rate_limit,
        },
    }
}

/// `Two` whose second step has a rate limit of its own.
static STEP_RATED: WorkflowDefinition = WorkflowDefinition {
    entries: &[
        plain_step("first", None),
        plain_step(
            "second",
            Some(Rate {
                count: 5,
                period_ms: 1_000,
            }),
        ),
    ],
    ..*<Two as crate::Workflow>::DEFINITION
};

/// `Two` with a rate on its first step only.
static RATED_FIRST: WorkflowDefinition = WorkflowDefinition {
    entries: &[
        plain_step(
            "first",
            Some(Rate {
                count: 1,
                period_ms: 1,
            }),
        ),
        plain_step("second", None),
    ],
    ..*<Two as crate::Workflow>::DEFINITION
};

fn next_second() -> NewStep {
    NewStep {
        step_name: "second".into(),
        attempt: 1,
        reattempts: 0,
        queue: "default".into(),
        priority: 0,
        timeout_ms: None,
        delay_ms: 0,
    }
}

fn plan() -> Plan {
    Plan {
        step_status: StepStatus::Completed,
        step_outcome: StepOutcome::Completed,
        next: Some(next_second()),
        run_status: RunStatus::Ready,
        current_step: Some("second".into()),
        run_error: None,
        cancel_open_steps: false,
        events: Vec::new(),
    }
}

fn hands(definition: &WorkflowDefinition) -> bool {
    let steps = step_plan(definition);
    hands_off(&plan(), Some(&steps), &["default".to_owned()], definition)
}

#[test]
fn a_workflow_or_a_step_with_a_limit_is_never_handed_on() {
    assert!(hands(<Two as crate::Workflow>::DEFINITION), "unlimited");
    assert!(!hands(&KEYED), "a per-key limit");
    assert!(!hands(&STEP_RATED), "the next step's own rate");
    // A rate on another step than the next does not stop it.
    assert!(hands(&RATED_FIRST));
}

#[test]
fn limits_in_force_elsewhere_stop_a_handoff_too() {
    let next = next_second();
    let within = |keys: &[&str]| {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        handoff_within_limits(&next, "handoff.two", &keys)
    };
    assert!(within(&[]));
    // Another workflow's limits and another queue's do not apply.
    assert!(within(&[
        "workflow:handoff.other",
        "key:handoff.twofold",
        "queue:bulk",
        "step:handoff.two/first",
        "step:handoff.tw/o/second",
    ]));
    for key in [
        "workflow:handoff.two",
        "key:handoff.two",
        "queue:default",
        "step:handoff.two/second",
    ] {
        assert!(!within(&[key]), "{key}");
    }
}
