//! The step context: what a step body can read and write.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
pub use tokio_util::sync::CancellationToken;

use crate::error::StepError;

/// A run's id: the primary key of its `runs` row.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct RunId(pub i64);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<i64> for RunId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

/// Reads a run id as the CLI and the dashboard print it: its decimal number.
impl std::str::FromStr for RunId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(Self)
    }
}

/// A signal's id: the primary key of its `signals` row.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct SignalId(pub i64);

impl fmt::Display for SignalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The longest signal name accepted, in characters.
pub use pgbus_core::MAX_SIGNAL_NAME_CHARS;

/// The largest signal payload accepted: 256 KiB of JSON. A signal carries a
/// fact or a reference, not bulk data (Temporal warns at the same size); the
/// gate's claim brings up to a page of pending payloads at once.
pub const MAX_SIGNAL_PAYLOAD_BYTES: usize = 256 * 1024;

/// The deepest signal payload accepted: 100 levels of arrays and objects. The
/// driver reads JSON back only to 128 levels (`serde_json`'s limit), and the
/// claim wraps each payload in two more.
pub const MAX_SIGNAL_PAYLOAD_DEPTH: usize = 100;

/// The largest run input accepted, a run's or a fan-out child's: 1 MiB of
/// JSON. An input is read with every attempt and shown on every view of the
/// run; bulk data belongs in the application's own tables, the input naming
/// it (Temporal limits a payload to 2 MB).
pub const MAX_INPUT_BYTES: usize = 1024 * 1024;

/// The sizes of the JSON values a deployment accepts: run inputs (a run's or
/// a fan-out child's) and signal payloads, as JSON text in bytes. The
/// defaults are [`MAX_INPUT_BYTES`] (1 MiB) and [`MAX_SIGNAL_PAYLOAD_BYTES`]
/// (256 KiB); set them with
/// [`DatabaseBuilder::limits`](crate::DatabaseBuilder::limits) (every client
/// and worker of that database) and the testkit's `TestEnv::limits`. The
/// depth (100 levels) is not a setting: deeper values could be stored but
/// not read back, since the driver reads JSON to 128 levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest run input accepted, in bytes of JSON.
    pub input_bytes: usize,
    /// The largest signal payload accepted, in bytes of JSON.
    pub signal_payload_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            input_bytes: MAX_INPUT_BYTES,
            signal_payload_bytes: MAX_SIGNAL_PAYLOAD_BYTES,
        }
    }
}

impl Limits {
    /// These limits with inputs of at most `bytes` (at least 1; at most
    /// [`MAX_JSONB_BYTES`], what Postgres stores, whatever is set).
    #[must_use]
    pub fn input_bytes(mut self, bytes: usize) -> Self {
        self.input_bytes = bytes.max(1);
        self
    }

    /// These limits with signal payloads of at most `bytes` (at least 1; at
    /// most [`MAX_JSONB_BYTES`]).
    #[must_use]
    pub fn signal_payload_bytes(mut self, bytes: usize) -> Self {
        self.signal_payload_bytes = bytes.max(1);
        self
    }

    /// The rule every store applies to a run's input before storing it, at
    /// every entry (`start` and its forms, the testkit's, a fan-out child):
    /// no NUL characters (Postgres `jsonb` cannot hold them), at most
    /// [`Limits::input_bytes`] as JSON and [`MAX_SIGNAL_PAYLOAD_DEPTH`] (100)
    /// levels of arrays and objects deep (deeper could be stored but not
    /// read back: the driver reads JSON to 128 levels). The same depth and
    /// NUL rule as a signal payload's.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) saying which.
    pub fn check_input(&self, input: &Value) -> Result<(), crate::Error> {
        check_json(input, "an input", self.input_bytes)
            .map_err(|reason| crate::Error::InvalidInput { reason })
    }

    /// The rules every store applies to a signal before storing it: a name
    /// of 1 to 255 characters without control characters, invisible
    /// formatting characters or whitespace at either end
    /// ([`pgbus_core::check_signal_name`], the rule a step's `wait_for` name
    /// is checked by at compile time), and a payload without NUL characters
    /// (Postgres `jsonb` cannot hold them), of at most
    /// [`Limits::signal_payload_bytes`] as JSON and
    /// [`MAX_SIGNAL_PAYLOAD_DEPTH`] levels deep (deeper could be stored but
    /// not read back).
    ///
    /// # Errors
    /// [`Error::InvalidSignal`](crate::Error::InvalidSignal) saying which.
    pub fn check_signal(&self, name: &str, payload: &Value) -> Result<(), crate::Error> {
        pgbus_core::check_signal_name(name)
            .map_err(str::to_owned)
            .and_then(|()| check_json(payload, "a signal payload", self.signal_payload_bytes))
            .map_err(|reason| crate::Error::InvalidSignal { reason })
    }
}

/// [`Limits::check_input`] with the default limits.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) saying which.
pub fn check_input(input: &Value) -> Result<(), crate::Error> {
    Limits::default().check_input(input)
}

/// [`Limits::check_signal`] with the default limits.
///
/// # Errors
/// [`Error::InvalidSignal`](crate::Error::InvalidSignal) saying which.
pub fn check_signal(name: &str, payload: &Value) -> Result<(), crate::Error> {
    Limits::default().check_signal(name, payload)
}

/// The one JSON rule of inputs and signal payloads (`what`): at most
/// [`MAX_SIGNAL_PAYLOAD_DEPTH`] deep, at most `max_bytes`, no NUL.
fn check_json(value: &Value, what: &str, max_bytes: usize) -> Result<(), String> {
    if depth(value) > MAX_SIGNAL_PAYLOAD_DEPTH {
        return Err(format!(
            "{what} is at most {MAX_SIGNAL_PAYLOAD_DEPTH} levels of arrays and objects deep"
        ));
    }
    let max_bytes = max_bytes.min(MAX_JSONB_BYTES);
    if serde_json::to_vec(value).map_or(true, |json| json.len() > max_bytes) {
        return Err(format!("{what} is at most {} of JSON", size(max_bytes)));
    }
    if holds_nul(value) {
        return Err(format!(
            "{what} cannot hold a NUL character (\\u0000), which Postgres `jsonb` cannot store"
        ));
    }
    Ok(())
}

/// `bytes` as people write it: `1 MiB`, `256 KiB`, `1000 bytes`, `1 byte`.
fn size(bytes: usize) -> String {
    match bytes {
        1 => "1 byte".to_owned(),
        b if b > 0 && b % (1024 * 1024) == 0 => format!("{} MiB", b / (1024 * 1024)),
        b if b > 0 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

/// The most JSON a value may have whatever the limits say: Postgres refuses
/// a `jsonb` over 255 MiB with a raw error.
pub const MAX_JSONB_BYTES: usize = 255 * 1024 * 1024;

/// How many levels of arrays and objects `value` nests (a scalar is 0), counted
/// up to one past [`MAX_SIGNAL_PAYLOAD_DEPTH`]. Not recursive, so a payload
/// deeper than the stack allows is measured too.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0)];
    while let Some((value, level)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => continue,
        };
        deepest = deepest.max(level + 1);
        if deepest > MAX_SIGNAL_PAYLOAD_DEPTH {
            break;
        }
        pending.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

/// A signal delivered to a run: a name and a JSON payload.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Signal {
    /// The signal name, as in `wait_for = "payment.settled"`.
    pub name: String,
    /// Whatever the sender attached (`null` when nothing).
    pub payload: Value,
}

impl Signal {
    /// The payload deserialized as `T`.
    ///
    /// # Errors
    /// A [`StepError`] wrapping the `serde_json` error when the payload is not a `T`.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, StepError> {
        serde_json::from_value(self.payload.clone()).map_err(StepError::from)
    }
}

/// Whether a string or key anywhere in `value` holds a NUL character.
pub(crate) fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map
            .iter()
            .any(|(key, item)| key.contains('\0') || holds_nul(item)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// What a step body sees: the typed input, where it is in the run, the outputs of
/// earlier steps, its own output, and the signal it waited for.
///
/// `I` is the workflow's `input` type.
#[derive(Debug)]
pub struct StepCx<I> {
    input: I,
    run_id: RunId,
    step: String,
    attempt: u32,
    outputs: BTreeMap<String, Value>,
    output: Option<Value>,
    signal: Option<Signal>,
    tick: Option<crate::schedule::Tick>,
    cancellation: CancellationToken,
}

impl<I> StepCx<I> {
    /// A context for attempt `attempt` (from 1) of step `step` of run `run_id`.
    /// The engine and the testkit build these; tests of a single step may too.
    pub fn new(input: I, run_id: RunId, step: impl Into<String>, attempt: u32) -> Self {
        Self {
            input,
            run_id,
            step: step.into(),
            attempt,
            outputs: BTreeMap::new(),
            output: None,
            signal: None,
            tick: None,
            cancellation: CancellationToken::new(),
        }
    }

    /// Adds the schedule tick the run was started for.
    #[must_use]
    pub fn with_tick(mut self, tick: Option<crate::schedule::Tick>) -> Self {
        self.tick = tick;
        self
    }

    /// The schedule tick this run was started for: the schedule's name and
    /// the tick's time (see [`crate::schedule`]), the same in every step and
    /// attempt of the run; `None` for a run started otherwise. A run a
    /// missed-tick catch-up started (`one`, `all(N)`) has the missed tick's
    /// time, not the time it ran at.
    pub const fn tick(&self) -> Option<&crate::schedule::Tick> {
        self.tick.as_ref()
    }

    /// Ties the context to a cancellation token: cancelling it tells the body
    /// through [`StepCx::cancelled`] and [`StepCx::is_cancelled`].
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// Whether this attempt lost its claim while it runs: the run was cancelled,
    /// the sweep took the attempt as stalled, or another worker holds it now.
    /// Whatever the body returns from then on is ignored (a
    /// `late_completion_ignored` event), so a long body should check this, or
    /// race [`StepCx::cancelled`], and stop early.
    ///
    /// The worker learns of a lost claim at its next heartbeat (every 5 s by
    /// default). Cancellation is cooperative, as with Temporal's activity
    /// cancellation through heartbeats: the body is never aborted mid-await.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Completes when this attempt loses its claim (see [`StepCx::is_cancelled`]);
    /// pending forever while it holds it. For `tokio::select!` beside the body's
    /// own work.
    pub async fn cancelled(&self) {
        self.cancellation.cancelled().await;
    }

    /// Adds the outputs of earlier steps, by durable step name.
    #[must_use]
    pub fn with_outputs(mut self, outputs: BTreeMap<String, Value>) -> Self {
        self.outputs = outputs;
        self
    }

    /// Adds the signal this attempt consumed.
    #[must_use]
    pub fn with_signal(mut self, signal: Signal) -> Self {
        self.signal = Some(signal);
        self
    }

    /// The run's input.
    pub const fn input(&self) -> &I {
        &self.input
    }

    /// The run's id.
    pub const fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The durable name of the step being run.
    pub fn step(&self) -> &str {
        &self.step
    }

    /// The attempt number, from 1; a reattempt adds one.
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The JSON output an earlier step of this run recorded, by durable step name.
    pub fn output_value(&self, step: &str) -> Option<&Value> {
        self.outputs.get(step)
    }

    /// The output an earlier step recorded, deserialized as `T`; `Ok(None)` when
    /// that step recorded none.
    ///
    /// # Errors
    /// A [`StepError`] wrapping the `serde_json` error when the output is not a `T`.
    pub fn output_of<T: DeserializeOwned>(&self, step: &str) -> Result<Option<T>, StepError> {
        self.outputs
            .get(step)
            .map(|value| serde_json::from_value(value.clone()))
            .transpose()
            .map_err(StepError::from)
    }

    /// Records this step's output (stored as JSON on the step row when the attempt
    /// ends; later steps read it with [`StepCx::output_of`]). A second call replaces
    /// the first.
    ///
    /// # Errors
    /// A [`StepError`] wrapping a `serde_json` error when `value` does not
    /// serialize, or when it holds a NUL character (`\u0000`), which Postgres
    /// `jsonb` cannot store; the output recorded before stays.
    pub fn output<T: Serialize>(&mut self, value: &T) -> Result<(), StepError> {
        let value = serde_json::to_value(value)?;
        if holds_nul(&value) {
            return Err(StepError::from(
                <serde_json::Error as serde::ser::Error>::custom(
                    "the output holds a NUL character (\\u0000), which Postgres `jsonb` cannot store",
                ),
            ));
        }
        self.output = Some(value);
        Ok(())
    }

    /// The output recorded so far, if any.
    pub const fn recorded_output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Takes the recorded output, leaving none.
    pub const fn take_output(&mut self) -> Option<Value> {
        self.output.take()
    }

    /// The signal this attempt waited for and consumed (`wait_for`), if any. `None`
    /// for steps without `wait_for`, and when `on_timeout = "run"` ran the body
    /// without one.
    pub const fn signal(&self) -> Option<&Signal> {
        self.signal.as_ref()
    }
}

#[cfg(test)]
mod tests;
