//! Runs one claimed attempt of a workflow: the checks before the body (unknown or
//! removed step, input, `cancel_if`, `skip_if`), the body itself with its timeout,
//! and the exception policies. User code runs here, outside any transaction or
//! lock; a panic anywhere in it is caught and becomes a step error.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt as _;
use serde_json::Value;

use crate::context::{RunId, Signal, StepCx};
use crate::definition::{Entry, EntryKind, OnTimeout, WaitFor, WorkflowDefinition};
use crate::engine::{
    AttemptResult, BatchState, ErrorRecord, Gate, Park, Resolution, StoredSignal, Verb,
    resolve_error, wait_expired,
};
use crate::error::{
    BadInput, FanOutFailed, Panicked, StepError, StepNotDefined, Timeout, WaitTimedOut,
};
use crate::fan_out::{ChildRun, FanOut};
use crate::overrides::Overrides;
use crate::store::Claim;
use crate::workflow::{StepFuture, Workflow};

/// What an attempt starts from: the claim, and the sizes a fan-out child's
/// input may have.
#[derive(Debug, Clone)]
pub struct AttemptInput {
    /// The claimed attempt: the row, what its body and gate read, and its
    /// cancellation.
    pub claim: Claim,
    /// The sizes a fan-out child's input may have.
    pub limits: crate::context::Limits,
}

impl AttemptInput {
    /// An attempt of `step_name` with nothing else known: no input, outputs,
    /// signals or batch, claimed now. For tests of single steps; the worker
    /// and the testkit hand over what their store's claim holds.
    #[must_use]
    pub fn new(run_id: RunId, step_name: impl Into<String>, attempt: i32) -> Self {
        Self {
            claim: Claim::new(run_id, "", step_name, attempt, chrono::Utc::now()),
            limits: crate::context::Limits::default(),
        }
    }
}

/// A registered workflow with its type erased, as a worker holds it, with the
/// definition it runs under: its own, or one a deployment's overrides derived
/// from it ([`crate::Overrides::apply`]).
pub(crate) trait ErasedWorkflow: Send + Sync + 'static {
    /// The definition in force.
    fn definition(&self) -> &'static WorkflowDefinition;
    /// The definition its source declares (`W::DEFINITION`).
    fn declared(&self) -> &'static WorkflowDefinition;
    /// The same workflow value under `definition` (derived from
    /// [`ErasedWorkflow::declared`]: the same entries, in the same order).
    fn under(&self, definition: &'static WorkflowDefinition) -> std::sync::Arc<dyn ErasedWorkflow>;
    fn schedule(&self) -> Option<&'static crate::schedule::DeclaredSchedule>;
    /// Runs one attempt; the fan_out children it starts are placed under
    /// `overrides` ([`crate::fan_out::placed`]).
    fn attempt<'a>(
        &'a self,
        input: AttemptInput,
        fault: Fault,
        overrides: &'a Overrides,
    ) -> futures_util::future::BoxFuture<'a, AttemptResult>;
}

/// Asked, once the guards let the body through, whether to fail the attempt
/// instead (see [`run_attempt_with_fault`]): how the testkit injects failures.
pub(crate) type Fault = Box<dyn FnOnce() -> Option<StepError> + Send>;

/// A workflow value and the definition it runs under.
pub(crate) struct Bound<W> {
    workflow: std::sync::Arc<W>,
    definition: &'static WorkflowDefinition,
}

impl<W: Workflow> Bound<W> {
    /// `workflow` under its own definition.
    pub(crate) fn new(workflow: W) -> Self {
        Self {
            workflow: std::sync::Arc::new(workflow),
            definition: W::DEFINITION,
        }
    }
}

impl<W: Workflow> ErasedWorkflow for Bound<W> {
    fn definition(&self) -> &'static WorkflowDefinition {
        self.definition
    }

    fn declared(&self) -> &'static WorkflowDefinition {
        W::DEFINITION
    }

    fn under(&self, definition: &'static WorkflowDefinition) -> std::sync::Arc<dyn ErasedWorkflow> {
        std::sync::Arc::new(Self {
            workflow: std::sync::Arc::clone(&self.workflow),
            definition,
        })
    }

    fn schedule(&self) -> Option<&'static crate::schedule::DeclaredSchedule> {
        W::SCHEDULE
    }

    fn attempt<'a>(
        &'a self,
        input: AttemptInput,
        fault: Fault,
        overrides: &'a Overrides,
    ) -> futures_util::future::BoxFuture<'a, AttemptResult> {
        Box::pin(run_attempt_under(
            &*self.workflow,
            self.definition,
            input,
            fault,
            overrides,
        ))
    }
}

/// Runs one attempt of `workflow` and says how it ended. Never panics: a panic in
/// a guard, body or handler is caught and handled as a [`Panicked`] error.
pub async fn run_attempt<W: Workflow>(workflow: &W, input: AttemptInput) -> AttemptResult {
    run_attempt_with_fault(workflow, input, || None).await
}

/// As [`run_attempt`], but `fault` is asked, once the guards have let the body
/// through, whether to fail instead: when it gives an error the body does not run
/// and the error is handled as if the body had returned it. How the testkit
/// injects failures; a guard that stops the step leaves the fault unused.
pub async fn run_attempt_with_fault<W: Workflow>(
    workflow: &W,
    input: AttemptInput,
    fault: impl FnOnce() -> Option<StepError>,
) -> AttemptResult {
    run_attempt_under(workflow, W::DEFINITION, input, fault, &Overrides::new()).await
}

/// [`run_attempt_with_fault`] under `definition`: `W`'s own, or one derived
/// from it by a deployment's overrides (the same entries, in the same order,
/// with other durations), the fan_out children it starts placed under
/// `overrides` (the deployment's).
async fn run_attempt_under<W: Workflow>(
    workflow: &W,
    definition: &'static WorkflowDefinition,
    input: AttemptInput,
    fault: impl FnOnce() -> Option<StepError>,
    overrides: &Overrides,
) -> AttemptResult {
    let claim = &input.claim;
    let (index, entry) = match locate(definition, &claim.step_name) {
        Ok(found) => found,
        Err(ended) => return ended,
    };

    if let Some(reason) = &claim.unreadable {
        let error = StepError::from(crate::error::Unstorable {
            reason: format!(
                "the run's stored input, outputs or signals cannot be read back: {reason}"
            ),
        });
        return failed(
            workflow,
            definition,
            entry,
            None,
            &error,
            claim.reattempts,
            None,
        );
    }
    let typed: W::Input = match serde_json::from_value(claim.input.clone()) {
        Ok(typed) => typed,
        Err(source) => {
            let error = StepError::from(BadInput {
                input_type: definition.input_type,
                source,
            });
            return failed(
                workflow,
                definition,
                entry,
                None,
                &error,
                claim.reattempts,
                None,
            );
        }
    };
    let attempt = u32::try_from(claim.attempt).unwrap_or(1);
    let mut cx = StepCx::new(typed, claim.run_id, claim.step_name.clone(), attempt)
        .with_outputs(claim.outputs.clone())
        .with_tick(claim.tick.clone())
        .with_cancellation(claim.cancellation.clone());

    if let Some(ended) = guards(workflow, definition, entry, &cx, claim.reattempts) {
        return ended;
    }
    let mut gate = None;
    if let Some(wait) = &entry.options.wait_for {
        match pass_gate(workflow, wait, &cx, &input) {
            Passed::Signal(signal, taken) => {
                cx = cx.with_signal(signal);
                gate = Some(taken);
            }
            Passed::TimedOut if wait.on_timeout == OnTimeout::Run => {
                gate = Some(Gate::TimedOut);
            }
            Passed::TimedOut => return timed_out(entry, wait),
            Passed::Park(park) => return AttemptResult::parked(park, None),
            Passed::Failed(error) => {
                return failed(
                    workflow,
                    definition,
                    entry,
                    Some(&cx),
                    &error,
                    claim.reattempts,
                    None,
                );
            }
        }
    }
    if let Some(decided) = batch_decides(entry, claim.batch.clone()) {
        return decided;
    }

    let (outcome, children) = match fault() {
        Some(fault) => (Err(fault), Vec::new()),
        None => run_body(workflow, index, &mut cx, claim.timeout_ms, input.limits).await,
    };
    let (outcome, children) = crate::fan_out::placed(outcome, children, overrides);
    let output = cx.take_output();
    let mut result = match outcome {
        Ok(crate::Flow::Complete) if !children.is_empty() => {
            AttemptResult::parked(Park::Batch { children }, output)
        }
        Ok(flow) => AttemptResult::ok(Verb::from(flow), output),
        Err(error) => failed(
            workflow,
            definition,
            entry,
            Some(&cx),
            &error,
            claim.reattempts,
            output,
        ),
    };
    result.gate = gate;
    result
}

/// What the `wait_for` gate found.
enum Passed {
    /// A signal for the body, and how it was taken.
    Signal(Signal, Gate),
    /// No matching signal, and the wait is over.
    TimedOut,
    /// No matching signal yet.
    Park(Park),
    /// The `matches` predicate failed.
    Failed(StepError),
}

/// How many unconsumed signals a claim brings to the gate at most; more wake
/// the row again at once for the next page.
pub const SIGNAL_PAGE: usize = 8;

/// The `wait_for` gate: the signal an earlier attempt of this step consumed (a
/// reattempt sees the same one); else the timeout again, for a reattempt of an
/// attempt that timed out; else the first unconsumed signal of the name that
/// the `matches` predicate accepts; else the timeout if it passed by the claim's
/// time and every pending signal has been looked at; else park. Signals the
/// predicate turns down stay unconsumed, and this attempt does not look at
/// them again.
fn pass_gate<W: Workflow>(
    workflow: &W,
    wait: &WaitFor,
    cx: &StepCx<W::Input>,
    input: &AttemptInput,
) -> Passed {
    let candidates = input.claim.signals.iter().filter(|s| s.name == wait.signal);
    if let Some(before) = candidates.clone().find(|s| s.taken_before) {
        return Passed::Signal(
            signal_of(before),
            Gate::Signal {
                id: before.id,
                fresh: false,
            },
        );
    }
    if input.claim.timed_out_before {
        return Passed::TimedOut;
    }
    let mut turned_down_to = None;
    let mut looked_at = 0;
    for stored in candidates.filter(|s| !s.taken_before) {
        looked_at += 1;
        let signal = signal_of(stored);
        let accepted = match wait.matches {
            None => Ok(true),
            Some(guard) => catch(|| workflow.signal_matches(guard, cx, &signal)),
        };
        match accepted {
            Ok(true) => {
                return Passed::Signal(
                    signal,
                    Gate::Signal {
                        id: stored.id,
                        fresh: true,
                    },
                );
            }
            Ok(false) => turned_down_to = Some(stored.id),
            Err(error) => return Passed::Failed(error),
        }
    }
    // A full page may have more behind it, sent before the claim: look at
    // them (the park wakes the row at once) before deciding on the timeout.
    let more_pending = looked_at >= SIGNAL_PAGE;
    if !more_pending
        && wait_expired(
            input.claim.waiting_since,
            wait.timeout_ms,
            input.claim.claimed_at,
        )
    {
        return Passed::TimedOut;
    }
    Passed::Park(Park::Signal {
        name: wait.signal.to_owned(),
        turned_down_to,
        timeout_ms: wait.timeout_ms,
    })
}

fn signal_of(stored: &StoredSignal) -> Signal {
    Signal {
        name: stored.name.clone(),
        payload: stored.payload.clone(),
    }
}

/// `on_timeout` = pause, cancel or skip, with a [`WaitTimedOut`] error on the
/// step row (not reported: it is the outcome the step asked for).
fn timed_out(entry: &Entry, wait: &WaitFor) -> AttemptResult {
    let error = StepError::from(WaitTimedOut {
        step: entry.name.to_owned(),
        signal: wait.signal.to_owned(),
        waited: pgbus_core::format_duration_ms(wait.timeout_ms.unwrap_or(0)),
    });
    let reason = error.message();
    let verb = match wait.on_timeout {
        OnTimeout::Cancel => Verb::Cancel { reason },
        OnTimeout::Skip => Verb::Skip { reason },
        OnTimeout::Pause | OnTimeout::Run => Verb::Pause { reason },
    };
    let mut result = AttemptResult::failed(verb, &error, false);
    result.gate = Some(Gate::TimedOut);
    result
}

/// For a fan_out step with a batch: the batch decides the step, unless it is a
/// failed one of an earlier attempt (a resume or reattempt after a failed batch
/// starts a fresh one; one after a crash takes over a batch that succeeded or
/// still runs).
fn batch_decides(entry: &Entry, batch: Option<BatchState>) -> Option<AttemptResult> {
    let batch = batch.filter(|b| entry.kind == EntryKind::FanOut && (b.own || !b.failed()))?;
    Some(batch_resolved(entry, batch))
}

/// A fan_out attempt claimed again after parking: its batch decides, the body
/// does not run again. All finished: complete. Any cancelled:
/// `on_batch_failure` (default pause) with a [`FanOutFailed`] error. Still
/// open (woken by mistake): park again.
fn batch_resolved(entry: &Entry, batch: BatchState) -> AttemptResult {
    // A row that takes over an earlier attempt's batch takes its output too
    // (its own row keeps what it stored when it parked).
    let output = if batch.own { None } else { batch.output };
    if batch.open {
        let park = Park::BatchOpen {
            batch_id: batch.id,
            adopt: !batch.own,
        };
        return AttemptResult::parked(park, output);
    }
    if batch.cancelled == 0 {
        return AttemptResult::ok(Verb::Complete, output);
    }
    let error = StepError::from(FanOutFailed {
        step: entry.name.to_owned(),
        batch_id: batch.id,
        total: batch.total,
        finished: batch.finished,
        cancelled: batch.cancelled,
    });
    let verb = Verb::from_failure_action(
        entry
            .options
            .on_batch_failure
            .unwrap_or(crate::definition::FailureAction::Pause),
        error.message(),
    );
    AttemptResult::failed(verb, &error, false)
}

/// The body of entry `index`, bounded by the step's timeout; a panic becomes a
/// [`Panicked`] error and running out of time a [`Timeout`] error.
/// The children a fan_out body added come back beside its result.
async fn run_body<W: Workflow>(
    workflow: &W,
    index: usize,
    cx: &mut StepCx<W::Input>,
    timeout_ms: Option<i64>,
    limits: crate::context::Limits,
) -> (Result<crate::Flow, StepError>, Vec<ChildRun>) {
    let mut fan = FanOut::limited(limits);
    let outcome = {
        let body: StepFuture<'_> = workflow.run_step(index, cx, &mut fan);
        let body = AssertUnwindSafe(body).catch_unwind();
        match timeout_ms.and_then(|ms| u64::try_from(ms).ok()) {
            Some(ms) => {
                let limit = Duration::from_millis(ms);
                match tokio::time::timeout(limit, body).await {
                    Ok(outcome) => outcome,
                    Err(_elapsed) => Ok(Err(StepError::from(Timeout { after: limit }))),
                }
            }
            None => body.await,
        }
    };
    let outcome = match outcome {
        Ok(result) => result,
        Err(panic) => Err(StepError::from(Panicked {
            message: panic_message(panic.as_ref()),
        })),
    };
    (outcome, fan.take_children())
}

/// The live entry a step row names; a gravestone skips and an unknown name pauses
/// with [`StepNotDefined`].
#[allow(clippy::result_large_err)] // the `Err` is the attempt's whole answer, built once
fn locate(
    definition: &'static WorkflowDefinition,
    step_name: &str,
) -> Result<(usize, &'static Entry), AttemptResult> {
    let Some((index, entry)) = definition.entry(step_name) else {
        let error = StepError::from(StepNotDefined {
            workflow: definition.name.to_owned(),
            step: step_name.to_owned(),
        });
        return Err(AttemptResult::failed(
            Verb::Pause {
                reason: format!("step `{step_name}` is not in the definition"),
            },
            &error,
            true,
        ));
    };
    if entry.kind == EntryKind::Removed {
        return Err(AttemptResult::ok(
            Verb::Skip {
                reason: format!("step `{}` was removed from the workflow", entry.name),
            },
            None,
        ));
    }
    Ok((index, entry))
}

/// `cancel_if` (OR-ed, in order), then `skip_if`: `Some` when they end the attempt.
fn guards<W: Workflow>(
    workflow: &W,
    definition: &'static WorkflowDefinition,
    entry: &Entry,
    cx: &StepCx<W::Input>,
    reattempts: i32,
) -> Option<AttemptResult> {
    let cancels = definition.cancel_if.iter().map(|guard| (*guard, true));
    let skips = entry.options.skip_if.map(|guard| (guard, false));
    for (guard, cancels) in cancels.chain(skips) {
        match catch(|| workflow.check_guard(guard, cx)) {
            Ok(true) if cancels => {
                let reason = format!("cancel_if `{}` is true", guard.method);
                return Some(AttemptResult::ok(Verb::Cancel { reason }, None));
            }
            Ok(true) => {
                let reason = format!("skip_if `{}` is true", guard.method);
                return Some(AttemptResult::ok(Verb::Skip { reason }, None));
            }
            Ok(false) => {}
            Err(error) => {
                let ended = failed(
                    workflow,
                    definition,
                    entry,
                    Some(cx),
                    &error,
                    reattempts,
                    None,
                );
                return Some(ended);
            }
        }
    }
    None
}

/// The policies' answer to `error`, asking a handler when a policy names one.
fn failed<W: Workflow>(
    workflow: &W,
    definition: &'static WorkflowDefinition,
    entry: &Entry,
    cx: Option<&StepCx<W::Input>>,
    error: &StepError,
    reattempts: i32,
    output: Option<Value>,
) -> AttemptResult {
    let record = Some(ErrorRecord::of(error));
    match resolve_error(definition, Some(entry), error, reattempts) {
        Resolution::Verb { verb, report } => AttemptResult {
            output,
            ..AttemptResult::failed(verb, error, report)
        },
        Resolution::Handler { handler, report } => {
            let mut handler_error = None;
            let verb = match cx.map(|cx| catch(|| workflow.handle_error(handler, cx, error))) {
                Some(Ok(Some(flow))) => Verb::from(flow),
                Some(Ok(None)) => Verb::Pause {
                    reason: format!(
                        "handler `{}` gave no verb for: {}",
                        handler.method,
                        error.message()
                    ),
                },
                Some(Err(failure)) => {
                    let reason =
                        format!("handler `{}` failed: {}", handler.method, failure.message());
                    handler_error = Some(ErrorRecord::of(&failure));
                    Verb::Pause { reason }
                }
                // The input did not deserialize: there is no context to hand over.
                None => Verb::Pause {
                    reason: format!(
                        "step failed before its context existed: {}",
                        error.message()
                    ),
                },
            };
            AttemptResult {
                verb,
                error: record,
                output,
                report,
                handler_error,
                gate: None,
                park: None,
            }
        }
    }
}

/// Runs a synchronous piece of user code, turning a panic into an error.
fn catch<T>(f: impl FnOnce() -> Result<T, StepError>) -> Result<T, StepError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(StepError::from(Panicked {
            message: panic_message(panic.as_ref()),
        }))
    })
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

#[cfg(test)]
mod tests;
