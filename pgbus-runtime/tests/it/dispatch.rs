//! The generated `Workflow` impl calls the right user method for each index.

use std::sync::Mutex;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{FanOut, GuardRef, HandlerRef, PolicyAction, RunId, StepNotDefined};

use crate::block_on;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    pub size: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("too big: {0}")]
struct TooBig(u32);

#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<&'static str>>,
}

impl Recorder {
    fn record(&self, call: &'static str) {
        self.calls.lock().expect("not poisoned").push(call);
    }

    fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().expect("not poisoned").clone()
    }
}

struct Child;

#[workflow(name = "jobs.child", input = u32)]
impl Child {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

#[workflow(name = "jobs.dispatch", input = Job, cancel_if = never, on_exception(handler = triage))]
impl Recorder {
    fn never(&self, _cx: &StepCx<Job>) -> bool {
        self.record("never");
        false
    }

    fn is_big(&self, cx: &StepCx<Job>) -> Result<bool, TooBig> {
        self.record("is_big");
        if cx.input().size > 1_000 {
            Err(TooBig(cx.input().size))
        } else {
            Ok(cx.input().size > 10)
        }
    }

    fn same_size(&self, cx: &StepCx<Job>, signal: &Signal) -> bool {
        self.record("same_size");
        signal.payload["size"] == cx.input().size
    }

    fn triage(&self, _cx: &StepCx<Job>, error: &StepError) -> Result<Option<Flow>, TooBig> {
        self.record("triage");
        match error.downcast_ref::<TooBig>() {
            Some(TooBig(size)) if *size > 5_000 => Err(TooBig(*size)),
            Some(_) => Ok(Some(Flow::skip("too big"))),
            None => Ok(None),
        }
    }

    #[step]
    async fn first(&self, cx: &mut StepCx<Job>) -> StepResult {
        self.record("first");
        cx.output(&(cx.input().size * 2))?;
        Ok(Flow::Complete)
    }

    removed_step!(gone);

    #[step(skip_if = is_big)]
    async fn second(&self, cx: &mut StepCx<Job>) -> Result<(), TooBig> {
        self.record("second");
        let doubled: Option<u32> = cx.output_of("first").map_err(|_| TooBig(0))?;
        if doubled == Some(0) {
            Err(TooBig(0))
        } else {
            Ok(())
        }
    }

    #[step(wait_for(name = "go", matches = same_size))]
    async fn third(&self, cx: &mut StepCx<Job>) -> Flow {
        self.record("third");
        match cx.signal() {
            Some(signal) => Flow::pause(format!("got {}", signal.name)),
            None => Flow::Finish,
        }
    }

    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Job>, fan: &mut FanOut) -> StepResult {
        self.record("spread");
        for part in 0..cx.input().size {
            fan.start::<Child>(&part)?;
        }
        Ok(Flow::Complete)
    }
}

fn cx(size: u32) -> StepCx<Job> {
    StepCx::new(Job { size }, RunId(7), "test", 1)
}

#[test]
fn steps_run_by_entry_index() {
    let workflow = Recorder::default();
    let mut fan = FanOut::new();

    let mut first = cx(4);
    assert_eq!(
        block_on(workflow.run_step(0, &mut first, &mut fan)).expect("ok"),
        Flow::Complete
    );
    assert_eq!(first.recorded_output(), Some(&serde_json::json!(8)));

    let outputs = [("first".to_owned(), serde_json::json!(0))].into();
    let mut second = cx(4).with_outputs(outputs);
    let error = block_on(workflow.run_step(2, &mut second, &mut fan)).expect_err("fails");
    assert!(error.is::<TooBig>());

    let mut third = cx(4).with_signal(Signal {
        name: "go".into(),
        payload: serde_json::json!({"size": 4}),
    });
    assert_eq!(
        block_on(workflow.run_step(3, &mut third, &mut fan)).expect("ok"),
        Flow::pause("got go")
    );
    let mut third = cx(4);
    assert_eq!(
        block_on(workflow.run_step(3, &mut third, &mut fan)).expect("ok"),
        Flow::Finish
    );

    let mut spread = cx(3);
    block_on(workflow.run_step(4, &mut spread, &mut fan)).expect("ok");
    let children: Vec<(&str, serde_json::Value)> = fan
        .children()
        .iter()
        .map(|c| (c.workflow, c.input.clone()))
        .collect();
    assert_eq!(
        children,
        [
            ("jobs.child", serde_json::json!(0)),
            ("jobs.child", serde_json::json!(1)),
            ("jobs.child", serde_json::json!(2))
        ]
    );

    assert_eq!(
        workflow.calls(),
        ["first", "second", "third", "third", "spread"]
    );
}

#[test]
fn a_gravestone_or_unknown_index_is_step_not_defined() {
    let workflow = Recorder::default();
    let mut fan = FanOut::new();
    for (index, name) in [(1, "gone"), (99, "#99")] {
        let error =
            block_on(workflow.run_step(index, &mut cx(1), &mut fan)).expect_err("not a step");
        let not_defined = error
            .downcast_ref::<StepNotDefined>()
            .expect("StepNotDefined");
        assert_eq!(not_defined.workflow, "jobs.dispatch");
        assert_eq!(not_defined.step, name);
    }
    assert!(workflow.calls().is_empty());
}

#[test]
fn guards_predicates_and_handlers_dispatch_by_id() {
    let workflow = Recorder::default();
    let def = <Recorder as Workflow>::DEFINITION;
    let never = def.cancel_if[0];
    let is_big = def.entries[2].options.skip_if.expect("skip_if");
    assert_eq!(
        is_big,
        GuardRef {
            id: 1,
            method: "is_big"
        }
    );

    assert!(!workflow.check_guard(never, &cx(1)).expect("ok"));
    assert!(workflow.check_guard(is_big, &cx(11)).expect("ok"));
    assert!(!workflow.check_guard(is_big, &cx(10)).expect("ok"));
    assert!(
        workflow
            .check_guard(is_big, &cx(2_000))
            .expect_err("guard error")
            .is::<TooBig>()
    );
    let unknown = GuardRef {
        id: 40,
        method: "nope",
    };
    assert!(
        workflow
            .check_guard(unknown, &cx(1))
            .expect_err("unknown")
            .is::<StepNotDefined>()
    );

    let same_size = def.entries[3]
        .options
        .wait_for
        .as_ref()
        .and_then(|w| w.matches)
        .expect("matches");
    let signal = Signal {
        name: "go".into(),
        payload: serde_json::json!({"size": 3}),
    };
    assert!(
        workflow
            .signal_matches(same_size, &cx(3), &signal)
            .expect("ok")
    );
    assert!(
        !workflow
            .signal_matches(same_size, &cx(4), &signal)
            .expect("ok")
    );

    let PolicyAction::Handler(triage) = def.on_exception[0].action else {
        panic!("handler")
    };
    assert_eq!(
        triage,
        HandlerRef {
            id: 0,
            method: "triage"
        }
    );
    let skip = workflow
        .handle_error(triage, &cx(1), &StepError::from(TooBig(2_000)))
        .expect("ok");
    assert_eq!(skip, Some(Flow::skip("too big")));
    assert_eq!(
        workflow
            .handle_error(triage, &cx(1), &StepError::msg("other"))
            .expect("ok"),
        None
    );
    assert!(
        workflow
            .handle_error(triage, &cx(1), &StepError::from(TooBig(9_000)))
            .is_err()
    );

    assert_eq!(
        workflow.calls(),
        [
            "never",
            "is_big",
            "is_big",
            "is_big",
            "same_size",
            "same_size",
            "triage",
            "triage",
            "triage"
        ]
    );
}
