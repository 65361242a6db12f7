//! Run one step body, with no store and no clock: the unit test of a step.

use std::collections::BTreeMap;

use pgbus_runtime::{
    ChildRun, EntryKind, FanOut, Flow, RunId, Signal, StepCx, StepError, StepNotDefined, Workflow,
};
use serde::Serialize;
use serde_json::Value;

/// Runs single steps of a workflow value with a chosen input, earlier outputs,
/// attempt number and signal.
///
/// ```
/// use pgbus_runtime::prelude::*;
/// use pgbus_testkit::StepHarness;
///
/// struct Greeter;
/// #[workflow(input = String)]
/// impl Greeter {
///     #[step]
///     async fn greet(&self, cx: &mut StepCx<String>) -> StepResult {
///         cx.output(&format!("hello {}", cx.input()))?;
///         Ok(Flow::Complete)
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let run = StepHarness::new(Greeter).run("greet", "ada".to_owned()).await;
/// assert_eq!(run.result.unwrap(), Flow::Complete);
/// assert_eq!(run.output, Some(serde_json::json!("hello ada")));
/// # });
/// ```
#[derive(Debug)]
pub struct StepHarness<W> {
    workflow: W,
    outputs: BTreeMap<String, Value>,
    attempt: u32,
    signal: Option<Signal>,
}

/// What one harnessed step did.
#[derive(Debug)]
#[non_exhaustive]
pub struct StepRun {
    /// The flow it returned, or its error (not yet put through the policies).
    pub result: Result<Flow, StepError>,
    /// The output it recorded.
    pub output: Option<Value>,
    /// The child runs a fan_out body added.
    pub children: Vec<ChildRun>,
}

impl<W: Workflow> StepHarness<W> {
    /// A harness around a workflow value; attempt 1, no outputs, no signal.
    pub fn new(workflow: W) -> Self {
        Self {
            workflow,
            outputs: BTreeMap::new(),
            attempt: 1,
            signal: None,
        }
    }

    /// Sets the output an earlier step recorded.
    ///
    /// # Panics
    /// When `value` does not serialize to JSON (a bug in the test).
    #[must_use]
    #[allow(clippy::expect_used)] // test support: a value that cannot serialize is the test's bug
    pub fn output(mut self, step: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).expect("an output that serializes");
        self.outputs.insert(step.to_owned(), value);
        self
    }

    /// Sets the attempt number the body sees.
    #[must_use]
    pub const fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Sets the signal the body sees.
    #[must_use]
    pub fn signal(mut self, signal: Signal) -> Self {
        self.signal = Some(signal);
        self
    }

    /// Runs the body of `step` (its durable name) with `input`. Guards and
    /// policies are not applied: this is the body alone.
    pub async fn run(&self, step: &str, input: W::Input) -> StepRun {
        let definition = W::DEFINITION;
        let Some((index, _)) = definition
            .entry(step)
            .filter(|(_, entry)| entry.kind != EntryKind::Removed)
        else {
            return StepRun {
                result: Err(StepError::from(StepNotDefined {
                    workflow: definition.name.to_owned(),
                    step: step.to_owned(),
                })),
                output: None,
                children: Vec::new(),
            };
        };
        let mut cx =
            StepCx::new(input, RunId(0), step, self.attempt).with_outputs(self.outputs.clone());
        if let Some(signal) = &self.signal {
            cx = cx.with_signal(signal.clone());
        }
        let mut fan = FanOut::new();
        let result = self.workflow.run_step(index, &mut cx, &mut fan).await;
        StepRun {
            result,
            output: cx.take_output(),
            children: fan.take_children(),
        }
    }
}
