//! What a `#[fan_out]` body uses to start child runs.

use serde_json::Value;

use crate::definition::WorkflowDefinition;
use crate::error::{Error, StepError};
use crate::flow::Flow;
use crate::overrides::Overrides;
use crate::workflow::Workflow;

/// A child run a fan_out body asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildRun {
    /// The child's workflow name.
    pub workflow: &'static str,
    /// The child's workflow definition: where its first step goes.
    pub definition: &'static WorkflowDefinition,
    /// The child's input as JSON.
    pub input: Value,
    /// The child's concurrency key, from its workflow's `key` method
    /// ([`Workflow::concurrency_key`]), if it has one: the child shares its
    /// workflow's per-key limits with every run of that key.
    pub concurrency_key: Option<String>,
}

impl PartialEq for ChildRun {
    fn eq(&self, other: &Self) -> bool {
        self.workflow == other.workflow && self.input == other.input
    }
}

/// The batch a `#[fan_out]` step is building.
///
/// Children are created together with the batch when the body returns
/// `Ok(Flow::Complete)`, in the transaction that parks the step as `waiting`, so a
/// crash never leaves half a batch; any other verb or an error discards them. The
/// step then waits until every child has finished or been cancelled: all
/// finished completes the step, any cancelled applies its `on_batch_failure`
/// (default pause) with a [`FanOutFailed`](crate::FanOutFailed) error. An empty
/// batch completes the step at once. A child may be of any workflow a worker
/// has registered, the parent's own included.
#[derive(Debug, Default)]
pub struct FanOut {
    children: Vec<ChildRun>,
    limits: crate::context::Limits,
}

impl FanOut {
    /// An empty batch, with the default [`Limits`](crate::Limits).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch whose children's inputs are held to `limits`.
    #[must_use]
    pub fn limited(limits: crate::context::Limits) -> Self {
        Self {
            children: Vec::new(),
            limits,
        }
    }

    /// Adds a child run of workflow `W` with `input`, keyed by `W`'s `key`
    /// method if it has one (its per-key concurrency and rate limits apply
    /// to the child as to any run).
    ///
    /// # Errors
    /// A [`StepError`] wrapping the `serde_json` error when `input` does not
    /// serialize, [`Error::InvalidInput`] when
    /// it breaks the input rule every start follows
    /// ([`Limits::check_input`](crate::Limits::check_input): NUL, size,
    /// depth) under the worker's limits, or
    /// [`Error::InvalidStartOption`] with
    /// `option: "concurrency_key"` when the key method gives a key a start
    /// would refuse.
    pub fn start<W: Workflow>(&mut self, input: &W::Input) -> Result<(), StepError> {
        let concurrency_key = W::concurrency_key(input);
        if let Some(key) = &concurrency_key {
            crate::start_options::check_concurrency_key(key).map_err(StepError::from)?;
        }
        let input = serde_json::to_value(input)?;
        self.limits.check_input(&input).map_err(StepError::from)?;
        self.children.push(ChildRun {
            workflow: W::DEFINITION.name,
            definition: W::DEFINITION,
            input,
            concurrency_key,
        });
        Ok(())
    }

    /// The children added so far, in order.
    #[must_use]
    pub fn children(&self) -> &[ChildRun] {
        &self.children
    }

    /// How many children were added.
    #[must_use]
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether no child was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Takes the children, leaving the batch empty.
    pub fn take_children(&mut self) -> Vec<ChildRun> {
        std::mem::take(&mut self.children)
    }
}

/// The children a fan_out body's `outcome` starts, placed under the
/// deployment's `overrides`: a child of an overridden workflow starts on its
/// queue, with its first step's wait and timeout, as a client's start of it
/// would be placed. Children start only when the body completed; any other
/// outcome discards them, as it does without overrides.
///
/// An override that does not fit a child's workflow (a step it lacks, on the
/// version this worker was built with) fails the attempt with the refusal
/// ([`OverrideRefused`](crate::overrides::OverrideRefused)) as its error, and
/// starts no child: the step's exception policies apply (by default the run
/// pauses, naming the override). Starting the child as its source declares
/// instead could put it on a queue no worker of the deployment claims, and
/// the parent would wait for it for ever.
pub(crate) fn placed(
    outcome: Result<Flow, StepError>,
    mut children: Vec<ChildRun>,
    overrides: &Overrides,
) -> (Result<Flow, StepError>, Vec<ChildRun>) {
    if overrides.is_empty() || children.is_empty() || !matches!(outcome, Ok(Flow::Complete)) {
        return (outcome, children);
    }
    // A batch's children mostly share one workflow: derive its definition
    // once, not once a child (each lookup clones the overrides for its key).
    let mut last: Option<(&'static WorkflowDefinition, &'static WorkflowDefinition)> = None;
    for child in &mut children {
        if let Some((source, derived)) = last
            && std::ptr::eq(source, child.definition)
        {
            child.definition = derived;
            continue;
        }
        match overrides.apply(child.definition) {
            Ok(definition) => {
                last = Some((child.definition, definition));
                child.definition = definition;
            }
            Err(Error::InvalidOverride(refused)) => {
                return (Err(StepError::from(*refused)), Vec::new());
            }
            Err(other) => return (Err(StepError::from(other)), Vec::new()),
        }
    }
    (outcome, children)
}
