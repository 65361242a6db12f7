//! Flow control, decided as pure functions: which concurrency and rate
//! limits a due step meets, whether a claim admits it, holds it back or
//! throttles it, and how many held rows a slot given back wakes.
//!
//! The rules (their reasons are in the repository's `docs/decisions.md`,
//! "Flow control (issue 21)"):
//!
//! - Limits are registered by workers ([`LimitTable::register`]): a
//!   workflow's by the last worker that registers it, a queue's by any
//!   worker that declares it.
//! - A candidate meets at most three concurrency limits, in this order:
//!   `workflow:<W>`, `key:<W>:<k>` (its run's concurrency key `k`),
//!   `queue:<Q>`; and at most three rates: `workflow:<W>`, `step:<W>/<s>`,
//!   `key:<W>:<k>` ([`LimitTable::limits`]).
//! - The claim decides candidates in its order ([`FlowState::decide`]): one
//!   at a concurrency limit is held by the first full key; one under every
//!   limit but outside a rate window is throttled until the window lets it
//!   start; any other is admitted, taking a slot of every limit it meets (a
//!   step-held one, or for `slot = "run"` the run's, unless the run holds it
//!   already) and a start in every rate window.
//! - A slot given back wakes as many held rows of its key as it has free
//!   slots, of `ready` runs, lowest priority number, earliest due, oldest
//!   first ([`to_wake`]).
//!
//! Where the ideas come from: DBOS queues (global and per-partition
//! concurrency, rate limiters), Hatchet's and Inngest's concurrency keys and
//! throttles, Oban Pro's and River Pro's partitioned limits. The rate is a
//! sliding log (the start times of the last `count` starts), exact in every
//! window.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use pgbus_core::flow::MAX_CONCURRENCY;

use crate::definition::{Rate, SlotHolder, WorkflowDefinition};

/// A concurrency limit's key: the name written on the rows it holds back
/// (`steps.held_by`) and on the slots it counts (`steps.slot_*`,
/// `runs.slot_*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SlotKey {
    /// `workflow:<workflow>`: every slot of the workflow.
    Workflow(String),
    /// `key:<workflow>:<key>`: the slots of the workflow's runs with this
    /// concurrency key.
    Key {
        /// The workflow.
        workflow: String,
        /// The runs' concurrency key.
        key: String,
    },
    /// `queue:<queue>`: the steps of the queue in progress.
    Queue(String),
}

impl fmt::Display for SlotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Workflow(workflow) => write!(f, "workflow:{workflow}"),
            Self::Key { workflow, key } => write!(f, "key:{workflow}:{key}"),
            Self::Queue(queue) => write!(f, "queue:{queue}"),
        }
    }
}

/// A rate limit's key: the name written on the rows waiting for its window
/// (`steps.throttled_by`) and on its window (`rate_windows.key`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RateKey {
    /// `workflow:<workflow>`: the step starts of the workflow.
    Workflow(String),
    /// `step:<workflow>/<step>`: the starts of one step.
    Step {
        /// The workflow.
        workflow: String,
        /// The step's durable name.
        step: String,
    },
    /// `key:<workflow>:<key>`: the step starts of the workflow's runs with
    /// this concurrency key.
    Key {
        /// The workflow.
        workflow: String,
        /// The runs' concurrency key.
        key: String,
    },
}

impl fmt::Display for RateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Workflow(workflow) => write!(f, "workflow:{workflow}"),
            Self::Step { workflow, step } => write!(f, "step:{workflow}/{step}"),
            Self::Key { workflow, key } => write!(f, "key:{workflow}:{key}"),
        }
    }
}

/// A concurrency limit as registered: at most `max_in_flight` slots held at
/// once, each by an in-progress step or by a run (`holder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// 1 to [`MAX_CONCURRENCY`].
    pub max_in_flight: u32,
    /// What holds a slot. Queue limits are always held by steps.
    pub holder: SlotHolder,
}

/// What one workflow declares (`flow_limits` rows `workflow:<W>` and
/// `key:<W>`, `rate_limits` rows `workflow:<W>`, `step:<W>/<s>`, `key:<W>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// `concurrency = N`.
    pub concurrency: Option<Concurrency>,
    /// `key_concurrency = N`, for each key.
    pub key_concurrency: Option<Concurrency>,
    /// `rate_limit = "N/period"`.
    pub rate: Option<Rate>,
    /// `key_rate_limit = "N/period"`, for each key.
    pub key_rate: Option<Rate>,
    /// Each step's `rate_limit`, by durable name.
    pub steps: BTreeMap<String, Rate>,
}

impl Declared {
    /// What `definition` declares; limits clamped to 1 to
    /// [`MAX_CONCURRENCY`] (the macro refuses others at compile time).
    #[must_use]
    pub fn of(definition: &WorkflowDefinition) -> Self {
        let flow = &definition.flow;
        let limit = |max: u32| Concurrency {
            max_in_flight: clamp_limit(max),
            holder: flow.slot,
        };
        Self {
            concurrency: flow.concurrency.map(limit),
            key_concurrency: flow.key_concurrency.map(limit),
            rate: flow.rate_limit,
            key_rate: flow.key_rate_limit,
            steps: definition
                .entries
                .iter()
                .filter_map(|entry| Some((entry.name.to_owned(), entry.options.rate_limit?)))
                .collect(),
        }
    }

    /// Whether it declares nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Concurrency limits that registration added, changed or removed: the
/// rows they may have held back are let go, for the claim to decide again
/// (a raised limit must not wait for a release to wake them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitChange {
    /// The workflow's `workflow:<W>` or `key:<W>` limit: every held row of
    /// the workflow is let go, whatever holds it.
    Workflow(String),
    /// `queue:<Q>`: the rows it holds are let go.
    Queue(String),
}

impl LimitChange {
    /// Whether a row of `workflow` held by `key` is let go.
    #[must_use]
    pub fn covers(&self, key: &SlotKey, workflow: &str) -> bool {
        match self {
            Self::Workflow(changed) => changed == workflow,
            Self::Queue(queue) => matches!(key, SlotKey::Queue(q) if q == queue),
        }
    }
}

/// The limits in force, as the store keeps them (`flow_limits`,
/// `rate_limits`): each workflow's as its last registering worker declared
/// them, and the queues' limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitTable {
    workflows: BTreeMap<String, Declared>,
    queues: BTreeMap<String, u32>,
}

impl LimitTable {
    /// Whether no limit at all is in force (the claim's fast path).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.workflows.values().all(Declared::is_empty)
    }

    /// What a worker registering `definitions` and `queue_limits`
    /// (`(queue, limit)`) changes: each workflow's limits are replaced by
    /// what its definition declares (the deploy in force; two versions that
    /// disagree: the last to register wins); each queue it names gets its
    /// limit (clamped to 1 to [`MAX_CONCURRENCY`]), the others are left
    /// alone. Returns the concurrency limits added, changed or removed, whose
    /// held rows the store lets go.
    pub fn register(
        &mut self,
        definitions: &[&WorkflowDefinition],
        queue_limits: &[(String, u32)],
    ) -> Vec<LimitChange> {
        let mut changed = Vec::new();
        for definition in definitions {
            let declared = Declared::of(definition);
            let before = self
                .workflows
                .get(definition.name)
                .cloned()
                .unwrap_or_default();
            if before.concurrency != declared.concurrency
                || before.key_concurrency != declared.key_concurrency
            {
                changed.push(LimitChange::Workflow(definition.name.to_owned()));
            }
            if declared.is_empty() {
                self.workflows.remove(definition.name);
            } else {
                self.workflows.insert(definition.name.to_owned(), declared);
            }
        }
        for (queue, limit) in queue_limits {
            let limit = clamp_limit(*limit);
            if self.queues.insert(queue.clone(), limit) != Some(limit) {
                changed.push(LimitChange::Queue(queue.clone()));
            }
        }
        changed
    }

    /// Every workflow that declares a limit, with what it declares, by
    /// name (bytewise).
    pub fn workflows(&self) -> impl Iterator<Item = (&str, &Declared)> {
        self.workflows.iter().map(|(name, d)| (name.as_str(), d))
    }

    /// Every queue limit, by queue name (bytewise).
    pub fn queues(&self) -> impl Iterator<Item = (&str, u32)> {
        self.queues.iter().map(|(name, max)| (name.as_str(), *max))
    }

    /// What `workflow` declares, as registered.
    #[must_use]
    pub fn declared(&self, workflow: &str) -> Option<&Declared> {
        self.workflows.get(workflow)
    }

    /// The limit of `queue`, as registered.
    #[must_use]
    pub fn queue_limit(&self, queue: &str) -> Option<u32> {
        self.queues.get(queue).copied()
    }

    /// The limit counted under `key`, if one is in force.
    #[must_use]
    pub fn concurrency(&self, key: &SlotKey) -> Option<Concurrency> {
        match key {
            SlotKey::Workflow(workflow) => self.workflows.get(workflow)?.concurrency,
            SlotKey::Key { workflow, .. } => self.workflows.get(workflow)?.key_concurrency,
            SlotKey::Queue(queue) => self.queue_limit(queue).map(|max_in_flight| Concurrency {
                max_in_flight,
                holder: SlotHolder::Step,
            }),
        }
    }

    /// The limits `candidate` meets, concurrency in the order workflow, key,
    /// queue, rates in the order workflow, step, key. A run without a
    /// concurrency key meets no per-key limit.
    #[must_use]
    pub fn limits(&self, candidate: &Candidate<'_>) -> Limits {
        let mut limits = Limits::default();
        let declared = self.workflows.get(candidate.workflow);
        let workflow = || candidate.workflow.to_owned();
        let run_key = candidate.run_key.map(str::to_owned);
        if let Some(declared) = declared {
            if let Some(limit) = declared.concurrency {
                limits
                    .concurrency
                    .push((SlotKey::Workflow(workflow()), limit));
            }
            if let (Some(limit), Some(key)) = (declared.key_concurrency, run_key.clone()) {
                let slot = SlotKey::Key {
                    workflow: workflow(),
                    key,
                };
                limits.concurrency.push((slot, limit));
            }
        }
        if let Some(max_in_flight) = self.queue_limit(candidate.queue) {
            let limit = Concurrency {
                max_in_flight,
                holder: SlotHolder::Step,
            };
            limits
                .concurrency
                .push((SlotKey::Queue(candidate.queue.to_owned()), limit));
        }
        if let Some(declared) = declared {
            if let Some(rate) = declared.rate {
                limits.rates.push((RateKey::Workflow(workflow()), rate));
            }
            if let Some(rate) = declared.steps.get(candidate.step) {
                let key = RateKey::Step {
                    workflow: workflow(),
                    step: candidate.step.to_owned(),
                };
                limits.rates.push((key, *rate));
            }
            if let (Some(rate), Some(key)) = (declared.key_rate, run_key) {
                let key = RateKey::Key {
                    workflow: workflow(),
                    key,
                };
                limits.rates.push((key, rate));
            }
        }
        limits
    }

    /// Whether an outcome may hand the next step (of `workflow`, named
    /// `step`, on `queue`) to its worker as far as flow control goes: not
    /// when the workflow declares any limit, the step a rate, or the queue a
    /// limit. Such a step goes through the claim, which decides on it.
    #[must_use]
    pub fn hands_off(&self, workflow: &str, step: &str, queue: &str) -> bool {
        let declared = self.workflows.get(workflow);
        let workflow_limited = declared.is_some_and(|d| {
            d.concurrency.is_some()
                || d.key_concurrency.is_some()
                || d.rate.is_some()
                || d.key_rate.is_some()
                || d.steps.contains_key(step)
        });
        !workflow_limited && self.queue_limit(queue).is_none()
    }
}

/// `limit` within 1 to [`MAX_CONCURRENCY`].
fn clamp_limit(limit: u32) -> u32 {
    limit.clamp(1, MAX_CONCURRENCY)
}

/// A due step the claim decides on.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Its workflow.
    pub workflow: &'a str,
    /// Its step's durable name.
    pub step: &'a str,
    /// Its queue.
    pub queue: &'a str,
    /// Its run's concurrency key, if it has one.
    pub run_key: Option<&'a str>,
}

/// The limits a candidate meets ([`LimitTable::limits`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Concurrency limits, in the order workflow, key, queue.
    pub concurrency: Vec<(SlotKey, Concurrency)>,
    /// Rates, in the order workflow, step, key.
    pub rates: Vec<(RateKey, Rate)>,
}

impl Limits {
    /// Whether it meets none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.concurrency.is_empty() && self.rates.is_empty()
    }
}

/// What the claim does with a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Claimed: it takes these slots and starts.
    Admit(Admitted),
    /// Held back by this concurrency limit (`held_by`): out of the claim's
    /// way until a slot of the key is given back.
    Hold(SlotKey),
    /// Outside this rate's window: due again `until` (`scheduled_at`),
    /// `throttled_by` the key, its attempt unchanged.
    Throttle {
        /// The rate whose window it waits for (the one that opens last).
        key: RateKey,
        /// When that window lets it start.
        until: DateTime<Utc>,
    },
}

/// What an admitted candidate takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The slots the step holds while in progress (`steps.slot_*`): every
    /// key it meets, a run-held one included (a run paused while its step
    /// runs holds the slot by that step until it ends).
    pub step_slots: Vec<SlotKey>,
    /// The slots its run holds until it finishes, is cancelled or pauses
    /// (`runs.slot_*`, `slot = "run"`). A run holding a key by its step and
    /// as a run holds one slot.
    pub run_slots: Vec<SlotKey>,
    /// The rate windows its start is written in.
    pub starts: Vec<RateKey>,
}

/// What the claim counts for the keys of its candidates, read fresh: the
/// slots held of each concurrency key and each rate's log of starts.
/// [`FlowState::decide`] updates it as it admits, so candidates decided in
/// a row each see those before them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowState {
    /// Slots held, by key: the runs holding it, by a step in progress or as
    /// a run (`slot = "run"`), each run once.
    pub holders: BTreeMap<SlotKey, usize>,
    /// The start times of the last `count` starts, oldest first, by key.
    pub windows: BTreeMap<RateKey, Vec<DateTime<Utc>>>,
}

impl FlowState {
    /// Decides one candidate meeting `limits` at `now`, whose run holds
    /// `run_slots` already (`slot = "run"`), and counts what it took.
    ///
    /// Concurrency first: the first key (workflow, key, queue) with no free
    /// slot holds it, a key its run holds as a run being passed over (and
    /// not counted again), whatever the limit's holder is now. Then rates:
    /// each window holding `count` starts after `now - period` opens for it
    /// at [`opening`] (its first place: every row a full window throttles
    /// waits for the same opening, as `flow_admit` in migration 0016
    /// decides; the claim at that opening admits what the window then has
    /// room for and throttles the rest again); it is throttled until the
    /// latest of those. Else admitted.
    pub fn decide(
        &mut self,
        limits: &Limits,
        run_slots: &[SlotKey],
        now: DateTime<Utc>,
    ) -> Admission {
        let mut taken = Admitted::default();
        let mut counted = Vec::new();
        for (key, limit) in &limits.concurrency {
            let by_run = limit.holder == SlotHolder::Run && !matches!(key, SlotKey::Queue(_));
            // A key the run holds as a run is its own slot, whatever the
            // holder now (a deploy may have turned `slot = "run"` into
            // `"step"` while the run held it: counting it would hold the
            // run's own next step back behind itself, for good).
            if !run_slots.contains(key) {
                let held = self.holders.get(key).copied().unwrap_or(0);
                if held >= usize::try_from(limit.max_in_flight).unwrap_or(usize::MAX) {
                    return Admission::Hold(key.clone());
                }
                counted.push(key);
            }
            taken.step_slots.push(key.clone());
            if by_run {
                taken.run_slots.push(key.clone());
            }
        }
        let mut latest: Option<(&RateKey, DateTime<Utc>)> = None;
        for (key, rate) in &limits.rates {
            let log = self.windows.get(key).map_or(&[][..], Vec::as_slice);
            if let Some(until) = opening(log, *rate, 1, now)
                && latest.is_none_or(|(_, at)| until > at)
            {
                latest = Some((key, until));
            }
        }
        if let Some((key, until)) = latest {
            return Admission::Throttle {
                key: key.clone(),
                until,
            };
        }
        for key in counted {
            *self.holders.entry(key.clone()).or_default() += 1;
        }
        for (key, rate) in &limits.rates {
            record_start(self.windows.entry(key.clone()).or_default(), *rate, now);
            taken.starts.push(key.clone());
        }
        Admission::Admit(taken)
    }

    /// Decides `candidates` in claim order, each with its limits and the
    /// slots its run holds: what [`FlowState::decide`] says of each in turn.
    pub fn decide_all<'a>(
        &mut self,
        candidates: impl IntoIterator<Item = (&'a Limits, &'a [SlotKey])>,
        now: DateTime<Utc>,
    ) -> Vec<Admission> {
        candidates
            .into_iter()
            .map(|(limits, run_slots)| self.decide(limits, run_slots, now))
            .collect()
    }
}

/// When a rate's window lets a start in, for the row `place` (from 1)
/// among those waiting for it; `None` when it has room `now`.
///
/// `log`: the start times of the last starts, oldest first. The window at
/// `now` holds the starts after `now - period`; with `count` or more there
/// (`m` of them), the first waiting row may start when the oldest start that
/// would leave fewer than `count` leaves the window (`log[m - count] +
/// period`), the `r`-th when the `r`-th such start does, and from the
/// `count + 1`-th on one period after the row `count` places before it: as
/// if each waiting row had started at its time.
#[must_use]
pub fn opening(
    log: &[DateTime<Utc>],
    rate: Rate,
    place: usize,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let period = chrono::Duration::milliseconds(i64::try_from(rate.period_ms).unwrap_or(i64::MAX));
    let since = now
        .checked_sub_signed(period)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let mut inside: Vec<DateTime<Utc>> = log.iter().copied().filter(|at| *at > since).collect();
    let count = usize::try_from(rate.count).unwrap_or(usize::MAX).max(1);
    if inside.len() < count {
        return None;
    }
    inside.sort_unstable();
    let place = place.max(1) - 1;
    let index = inside.len() - count + place % count;
    let periods = i32::try_from(place / count + 1).unwrap_or(i32::MAX);
    let later = period.checked_mul(periods).unwrap_or(chrono::Duration::MAX);
    Some(
        inside[index]
            .checked_add_signed(later)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// Writes a start at `now` in a rate's log (oldest first), keeping the last
/// `rate.count` starts.
pub fn record_start(log: &mut Vec<DateTime<Utc>>, rate: Rate, now: DateTime<Utc>) {
    log.push(now);
    log.sort_unstable();
    let count = usize::try_from(rate.count).unwrap_or(usize::MAX);
    if log.len() > count {
        log.drain(..log.len() - count);
    }
}

/// A row held back by a key, as the release reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldRow {
    /// The step row.
    pub id: i64,
    /// Its priority (lower first).
    pub priority: i16,
    /// When it was due.
    pub due: DateTime<Utc>,
    /// Whether its run is `ready` (a paused run's rows stay held until it is
    /// resumed, which lets them go).
    pub run_ready: bool,
}

/// The free slots of a key: `limit` minus the slots `held`; every row when
/// no limit is in force any more.
#[must_use]
pub fn free_slots(limit: Option<Concurrency>, held: usize) -> usize {
    limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit.max_in_flight)
            .unwrap_or(usize::MAX)
            .saturating_sub(held)
    })
}

/// The held rows a key's release lets go (their `held_by` cleared, due
/// again for the claim to decide): as many as `free` slots, of `ready`
/// runs, lowest priority number, then earliest due, then oldest row first.
#[must_use]
pub fn to_wake(free: usize, held: impl IntoIterator<Item = HeldRow>) -> Vec<i64> {
    let mut ready: Vec<HeldRow> = held.into_iter().filter(|row| row.run_ready).collect();
    ready.sort_unstable_by_key(|row| (row.priority, row.due, row.id));
    ready.into_iter().take(free).map(|row| row.id).collect()
}

#[cfg(test)]
mod tests;
