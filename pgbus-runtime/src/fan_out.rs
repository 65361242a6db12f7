//! What a `#[fan_out]` body uses to start child runs.

use serde_json::Value;

use crate::error::StepError;
use crate::workflow::Workflow;

/// A child run a fan_out body asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRun {
    /// The child's workflow name.
    pub workflow: &'static str,
    /// The child's input as JSON.
    pub input: Value,
}

/// The batch a `#[fan_out]` step is building. Children are created together with
/// the batch when the body returns, in the transaction that parks the step, so a
/// crash never leaves half a batch.
#[derive(Debug, Default)]
pub struct FanOut {
    children: Vec<ChildRun>,
}

impl FanOut {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a child run of workflow `W` with `input`.
    ///
    /// # Errors
    /// A [`StepError`] wrapping the `serde_json` error when `input` does not serialize.
    pub fn start<W: Workflow>(&mut self, input: &W::Input) -> Result<(), StepError> {
        self.children.push(ChildRun {
            workflow: W::DEFINITION.name,
            input: serde_json::to_value(input)?,
        });
        Ok(())
    }

    /// The children added so far, in order.
    #[must_use]
    pub fn children(&self) -> &[ChildRun] {
        &self.children
    }

    /// Takes the children, leaving the batch empty.
    pub fn take_children(&mut self) -> Vec<ChildRun> {
        std::mem::take(&mut self.children)
    }
}
