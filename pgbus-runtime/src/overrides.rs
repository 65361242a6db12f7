//! Per-deployment overrides: a deployment's own values for a workflow's or a
//! step's durations (`timeout`, `wait`, `wait_timeout`, `deadline`), queue,
//! priority and limits, over what `#[workflow]` and `#[step]` say in the
//! source: a shorter `wait_timeout` in staging, a longer `timeout` in
//! production, a queue of its own for one region, without editing code.
//!
//! Written in code with a builder, or read from JSON (a string, a file, or
//! the environment: [`OVERRIDES_ENV`], [`OVERRIDES_FILE_ENV`]):
//!
//! ```
//! use pgbus_runtime::Overrides;
//!
//! let in_code = Overrides::new()
//!     .workflow("orders.fulfil", |w| w.queue("orders-staging").concurrency(4).deadline("1h"))
//!     .step("orders.fulfil", "charge", |s| s.timeout("2m").wait_timeout("10m"));
//!
//! let from_json = Overrides::from_json_str(
//!     r#"{"workflows": {"orders.fulfil": {
//!           "queue": "orders-staging", "concurrency": 4, "deadline": "1h",
//!           "steps": {"charge": {"timeout": "2m", "wait_timeout": "10m"}}}}}"#,
//! )?;
//! assert_eq!(in_code, from_json);
//! # Ok::<(), pgbus_runtime::Error>(())
//! ```
//!
//! **Where they apply.** Give them to the [`Database`](crate::Database)
//! ([`DatabaseBuilder::overrides`](crate::DatabaseBuilder::overrides) or
//! [`Database::with_overrides`](crate::Database::with_overrides)): its
//! clients place the first step of each run they start with the overrides in
//! force, its workers run every later step with them, and place with them
//! the first step of each fan_out child they start. A deployment gives the
//! same overrides to all its clients and workers, whatever each registers:
//! a client without a queue override puts a run's first step on the
//! source's queue, which a worker that claims only the overridden one never
//! takes. [`WorkerBuilder::overrides`](crate::WorkerBuilder::overrides)
//! replaces the database's for one worker; the testkit's
//! `TestEnv::overrides` takes the same value.
//!
//! **Checked at registration, with the macro's rules.** Every value is
//! checked by the functions the macro checks the source with
//! ([`pgbus_core::rules`], [`pgbus_core::parse_duration_ms`],
//! [`pgbus_core::parse_rate`]) when the overrides are read or given: a
//! duration outside the grammar, a zero `timeout`, `wait_timeout` or
//! `deadline`, an empty queue or one with whitespace, a priority outside
//! `i16`, a limit outside 1 to 100,000, a bad rate. Every name of a
//! workflow a worker registers is checked against its definition:
//! [`WorkerBuilder::build`](crate::WorkerBuilder::build) refuses, with
//! [`Error::InvalidOverride`] naming the workflow, the step and the option,
//! an override of a step the workflow does not have or that is a
//! gravestone, and a `wait_timeout` on a step without `wait_for` (a
//! `#[fan_out]` has none). Never later: a running worker never meets a
//! refused override of what it runs.
//!
//! Overrides of workflows a worker does not register are kept, for the
//! fan_out children it starts (one deployment's overrides serve every
//! worker, each registering its own workflows), and logged once at build:
//! `warn` when the name is a typo away from a registered one (with the name
//! it may mean), else `info`. A misspelt workflow name is not refused
//! there; it shows in that log, and in `pgbus workers`, which marks the
//! workflows a worker runs overridden. A fan_out child whose workflow an
//! override does not fit fails the fan_out's attempt with the refusal
//! ([`OverrideRefused`]) as its error, before any child starts: the step's
//! exception policies apply, by default pausing the run. A client, which
//! does not know the workflows, checks the overrides of a workflow when it
//! first starts one.
//!
//! **What is in force is visible.** The overridden definition keeps its
//! definition digest (overrides never change the step list, so claims, the
//! registry and `definition_changed` behave as before), and gets its own
//! options JSON (the source's, with the overridden values in place and an
//! `"overrides"` key listing them, durations in milliseconds) and options
//! digest, which runs record and the registry stores per worker and
//! workflow beside the overrides themselves
//! ([`RegisteredWorkflow`](crate::RegisteredWorkflow)).
//!
//! Overrides set values; they cannot remove an option the source declares
//! (a limit, a deadline, a step's own queue). A workflow-level `queue` or
//! `priority` applies to the steps that name none of their own, as the
//! source's does. `#[cfg_attr(..., step(...))]` is refused by the macro:
//! overrides are the way to vary options per deployment.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::definition::WorkflowDefinition;
use crate::error::Error;

mod apply;

/// Why an override was refused ([`Error::InvalidOverride`]): which
/// workflow, step and option, and the rule it breaks with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "override of workflow `{workflow}`{} refused: {reason}",
    .step.as_ref().map(|step| format!(", step `{step}`")).unwrap_or_default()
)]
#[non_exhaustive]
pub struct OverrideRefused {
    /// The workflow's durable name, as the override gives it.
    pub workflow: String,
    /// The step's durable name, for an override of a step.
    pub step: Option<String>,
    /// The option refused (`timeout`, `wait`, `wait_timeout`, `queue`,
    /// `priority`, `concurrency`, `key_concurrency`, `rate_limit`,
    /// `key_rate_limit`, `deadline`), or `step` for a step that is not
    /// there (or is a gravestone).
    pub option: &'static str,
    /// Why, naming the option first, and the fix.
    pub reason: String,
}

impl OverrideRefused {
    /// The refusal of `option` of `workflow` (and `step`), as an [`Error`].
    pub(crate) fn error(
        workflow: &str,
        step: Option<&str>,
        option: &'static str,
        reason: String,
    ) -> Error {
        Error::InvalidOverride(Box::new(Self {
            workflow: workflow.to_owned(),
            step: step.map(str::to_owned),
            option,
            reason,
        }))
    }
}

/// The environment variable [`Overrides::from_env`] reads the overrides'
/// JSON text from.
pub const OVERRIDES_ENV: &str = "PGBUS_OVERRIDES";

/// The environment variable [`Overrides::from_env`] reads the path of a JSON
/// file of overrides from.
pub const OVERRIDES_FILE_ENV: &str = "PGBUS_OVERRIDES_FILE";

/// A deployment's overrides of workflow and step options, by durable name
/// (the workflow's `name`, the step's `name`; not Rust identifiers). See the
/// [module documentation](self) for where they apply and how they are
/// checked.
///
/// As JSON (unknown keys are refused):
///
/// ```json
/// {"workflows": {
///   "<workflow>": {
///     "queue": "orders-staging", "priority": 5,
///     "concurrency": 4, "key_concurrency": 1,
///     "rate_limit": "10/1s", "key_rate_limit": "1/1m", "deadline": "1h",
///     "steps": {
///       "<step>": {"wait": "0s", "timeout": "2m", "wait_timeout": "10m",
///                  "queue": "gpu", "priority": -1, "rate_limit": "5/1s"}}}}}
/// ```
///
/// Durations in the macro's grammar (`"250ms"`, `"1h30m"`), rates
/// `"<count>/<period>"`, limits and priorities as numbers. Every key is
/// optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[must_use]
pub struct Overrides {
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_names"
    )]
    workflows: BTreeMap<String, WorkflowOverrides>,
}

/// The overrides of one workflow: its own options, and its steps' by name.
/// Built by the closure given to [`Overrides::workflow`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[must_use]
pub struct WorkflowOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_concurrency: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_rate_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_names"
    )]
    steps: BTreeMap<String, StepOverrides>,
}

/// The overrides of one step (or `#[fan_out]`). Built by the closure given
/// to [`Overrides::step`] or [`WorkflowOverrides::step`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[must_use]
pub struct StepOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_limit: Option<String>,
}

/// A JSON object of overrides by name, each name once: serde's map would keep
/// the last of two entries of one name and drop the first without a word.
fn unique_names<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Names<V>(std::marker::PhantomData<V>);

    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Names<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of overrides by durable name")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut names = BTreeMap::new();
            while let Some((name, value)) = map.next_entry::<String, V>()? {
                if names.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "`{name}` is given twice; give each name once, with all its overrides"
                    )));
                }
                names.insert(name, value);
            }
            Ok(names)
        }
    }

    deserializer.deserialize_map(Names(std::marker::PhantomData))
}

impl Overrides {
    /// No overrides: every workflow as its source says.
    pub fn new() -> Self {
        Self::default()
    }

    /// Overrides options of workflow `name` (its durable name): `set` is given
    /// what is set for it so far and returns it changed. Called again for the
    /// same name, it changes the same entry.
    pub fn workflow(
        mut self,
        name: impl Into<String>,
        set: impl FnOnce(WorkflowOverrides) -> WorkflowOverrides,
    ) -> Self {
        let entry = self.workflows.entry(name.into()).or_default();
        *entry = set(std::mem::take(entry));
        self
    }

    /// Overrides options of step `step` of workflow `workflow` (durable
    /// names), as [`WorkflowOverrides::step`].
    pub fn step(
        self,
        workflow: impl Into<String>,
        step: impl Into<String>,
        set: impl FnOnce(StepOverrides) -> StepOverrides,
    ) -> Self {
        self.workflow(workflow, |w| w.step(step, set))
    }

    /// Reads overrides from JSON text (the shape on [`Overrides`]) and checks
    /// every value (not yet the names: those are checked against the
    /// definitions at registration).
    ///
    /// # Errors
    /// [`Error::InvalidSetting`] (`setting` `overrides`) for text that is not
    /// JSON of that shape, an unknown key included, with serde's line and
    /// column; [`Error::InvalidOverride`] for a value the macro would refuse.
    pub fn from_json_str(text: &str) -> Result<Self, Error> {
        Self::parse(text, "overrides")
    }

    /// Reads overrides from a JSON file, as [`Overrides::from_json_str`].
    ///
    /// # Errors
    /// [`Error::UnreadableFile`] (`setting` `overrides`) when the file cannot
    /// be read, and the errors of [`Overrides::from_json_str`], `setting`
    /// then naming the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| Error::UnreadableFile {
            setting: "overrides",
            path: path.to_owned(),
            reason: error.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Reads overrides from the environment: the JSON text of
    /// [`OVERRIDES_ENV`] (`PGBUS_OVERRIDES`), or the file
    /// [`OVERRIDES_FILE_ENV`] (`PGBUS_OVERRIDES_FILE`) names; none when
    /// neither is set (an empty value counts as not set).
    ///
    /// # Errors
    /// [`Error::InvalidSetting`] when both are set, and the errors of
    /// [`Overrides::from_json_str`] and [`Overrides::from_file`].
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(&crate::connection::env::process_env)
    }

    /// [`Overrides::from_env`] with the variables read through `lookup`.
    pub(crate) fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let text = lookup(OVERRIDES_ENV).filter(|value| !value.is_empty());
        let file = lookup(OVERRIDES_FILE_ENV).filter(|value| !value.is_empty());
        match (text, file) {
            (Some(_), Some(_)) => Err(Error::InvalidSetting {
                setting: OVERRIDES_ENV.to_owned(),
                problem: format!(
                    "and `{OVERRIDES_FILE_ENV}` are both set; set one: the JSON text or the path of a file holding it"
                ),
            }),
            (Some(text), None) => Self::parse(&text, OVERRIDES_ENV),
            (None, Some(path)) => Self::from_file(path),
            (None, None) => Ok(Self::new()),
        }
    }

    fn parse(text: &str, setting: &str) -> Result<Self, Error> {
        let overrides: Self = serde_json::from_str(text).map_err(|error| Error::InvalidSetting {
            setting: setting.to_owned(),
            problem: format!(
                "is not valid overrides JSON: {error}; the shape is \
                 {{\"workflows\": {{\"<workflow>\": {{\"queue\": ..., \"steps\": {{\"<step>\": {{\"timeout\": \"2m\"}}}}}}}}}}"
            ),
        })?;
        overrides.check()?;
        Ok(overrides)
    }

    /// Checks every value with the macro's rules, not the names (see
    /// [`Overrides::apply`] for those).
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] for the first value refused, in name order.
    pub fn check(&self) -> Result<(), Error> {
        for (workflow, overrides) in &self.workflows {
            apply::check(workflow, overrides)?;
        }
        Ok(())
    }

    /// Whether nothing is overridden.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.workflows.is_empty()
    }

    /// The workflows overridden, by durable name, sorted.
    pub fn workflows(&self) -> impl Iterator<Item = &str> {
        self.workflows.keys().map(String::as_str)
    }

    /// The definition in force for `definition`'s workflow: `definition`
    /// itself when these overrides do not name it, else a copy with the
    /// overridden values, its own options JSON and options digest, and the
    /// same definition digest. Derived once per process for each source
    /// definition and set of overrides (kept for the life of the process, as
    /// the source's own definition is), so calling it again is a lookup.
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] for a value the macro would refuse, a step
    /// the workflow does not have (or a gravestone), and a `wait_timeout` on
    /// a step without `wait_for`.
    pub fn apply(
        &self,
        definition: &'static WorkflowDefinition,
    ) -> Result<&'static WorkflowDefinition, Error> {
        match self.workflows.get(definition.name) {
            None => Ok(definition),
            Some(overrides) => apply::derived(definition, overrides),
        }
    }

    /// The overridden workflows not in `registered` (durable names), by
    /// name, each with the registered name it is a likely typo of, if any
    /// (at most two edits away, the nearest): what a worker logs at build.
    pub(crate) fn unregistered<'a>(
        &'a self,
        registered: &[&'a str],
    ) -> Vec<(&'a str, Option<&'a str>)> {
        self.workflows
            .keys()
            .filter(|workflow| !registered.contains(&workflow.as_str()))
            .map(|workflow| (workflow.as_str(), typo_of(workflow, registered)))
            .collect()
    }
}

/// The name of `names` that `name` is a likely typo of: at most two edits
/// away (a character added, dropped, changed, or two neighbours swapped), the
/// nearest, the first in sort order on a tie. Stricter than the did-you-mean
/// of a refusal ([`pgbus_core::closest`]): a deployment's workflows often
/// share a prefix (`orders.fulfil`, `orders.refund`), and those are other
/// workflows, not typos.
fn typo_of<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    sorted
        .into_iter()
        .map(|candidate| (edits(name, candidate), candidate))
        .filter(|(edits, _)| *edits <= 2)
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, candidate)| candidate)
}

/// The edits from `a` to `b`: characters added, dropped or changed, and
/// neighbours swapped (the optimal string alignment distance).
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows of the table: two back (for a swap), the last, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let change = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + change);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

impl WorkflowOverrides {
    /// The queue steps run on unless a step names its own (the rule of
    /// `#[workflow(queue)]`: not empty, no whitespace).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// The priority steps run at unless a step names its own; lower runs
    /// first.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(i64::from(priority));
        self
    }

    /// At most this many of the workflow's slots held at once, fleet-wide
    /// (1 to 100,000), as `#[workflow(concurrency)]`.
    pub fn concurrency(mut self, limit: u32) -> Self {
        self.concurrency = Some(i64::from(limit));
        self
    }

    /// At most this many slots per concurrency key (1 to 100,000), as
    /// `#[workflow(key_concurrency)]`.
    pub fn key_concurrency(mut self, limit: u32) -> Self {
        self.key_concurrency = Some(i64::from(limit));
        self
    }

    /// At most this many step starts of the workflow per window,
    /// `"<count>/<period>"` (e.g. `"10/1s"`), as `#[workflow(rate_limit)]`.
    pub fn rate_limit(mut self, rate: impl Into<String>) -> Self {
        self.rate_limit = Some(rate.into());
        self
    }

    /// At most this many step starts per key per window, as
    /// `#[workflow(key_rate_limit)]`.
    pub fn key_rate_limit(mut self, rate: impl Into<String>) -> Self {
        self.key_rate_limit = Some(rate.into());
        self
    }

    /// How long a run may take from its start time, a duration over zero
    /// (e.g. `"1h"`), as `#[workflow(deadline)]`. A start's own deadline
    /// still wins.
    pub fn deadline(mut self, deadline: impl Into<String>) -> Self {
        self.deadline = Some(deadline.into());
        self
    }

    /// Overrides options of step `name` (its durable name): `set` is given
    /// what is set for it so far and returns it changed.
    pub fn step(
        mut self,
        name: impl Into<String>,
        set: impl FnOnce(StepOverrides) -> StepOverrides,
    ) -> Self {
        let entry = self.steps.entry(name.into()).or_default();
        *entry = set(std::mem::take(entry));
        self
    }
}

impl StepOverrides {
    /// The delay after the previous step ends (for the first step, after
    /// the run's start time), a duration (`"0s"` allowed), as
    /// `#[step(wait)]`.
    pub fn wait(mut self, wait: impl Into<String>) -> Self {
        self.wait = Some(wait.into());
        self
    }

    /// The stall horizon of an attempt, a duration over zero, as
    /// `#[step(timeout)]`.
    pub fn timeout(mut self, timeout: impl Into<String>) -> Self {
        self.timeout = Some(timeout.into());
        self
    }

    /// How long the step waits for its signal, a duration over zero, as
    /// `#[step(wait_timeout)]`; only on a step with `wait_for`.
    pub fn wait_timeout(mut self, wait_timeout: impl Into<String>) -> Self {
        self.wait_timeout = Some(wait_timeout.into());
        self
    }

    /// The step's queue, as `#[step(queue)]`.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// The step's priority; lower runs first.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(i64::from(priority));
        self
    }

    /// At most this many starts of the step per window, `"<count>/<period>"`,
    /// as `#[step(rate_limit)]`.
    pub fn rate_limit(mut self, rate: impl Into<String>) -> Self {
        self.rate_limit = Some(rate.into());
        self
    }
}

#[cfg(test)]
mod tests;
