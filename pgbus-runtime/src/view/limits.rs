//! The flow limits in force and what each holds now (see
//! [`Client::limits`](crate::Client::limits)).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::definition::SlotHolder;

/// The concurrency and rate limits in force (`flow_limits`, `rate_limits`,
/// as the last registering workers declared them), and per concurrency key
/// the slots held and the rows held back now. Every part stops at a bound:
/// at most [`LimitsNow::LIMITS_MAX`] limits of each kind and
/// [`LimitsNow::KEYS_MAX`] keys, and each count reads at most
/// [`LimitsNow::COUNT_CAP`] rows (a count that reached it is a floor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LimitsNow {
    /// The store's time the limits were read at (rate windows end there).
    pub at: DateTime<Utc>,
    /// The concurrency limits, by key (bytewise).
    pub concurrency: Vec<ConcurrencyNow>,
    /// Per concurrency key with a slot held or a row held back: its use,
    /// by limit then key (bytewise). A key whose limit is no longer in
    /// force is listed too (its held rows wait for the next release or
    /// claim).
    pub keys: Vec<KeyNow>,
    /// The rate limits, by key (bytewise).
    pub rates: Vec<RateNow>,
}

impl LimitsNow {
    /// The most limits of each kind read.
    pub const LIMITS_MAX: i64 = 1_000;
    /// The most concurrency keys listed.
    pub const KEYS_MAX: i64 = 1_000;
    /// The most rows each count reads (slots by steps, slots by runs, held
    /// rows, each of its own).
    pub const COUNT_CAP: i64 = 10_000;

    /// The limits (for a store outside this crate).
    #[must_use]
    pub const fn new(
        at: DateTime<Utc>,
        concurrency: Vec<ConcurrencyNow>,
        keys: Vec<KeyNow>,
        rates: Vec<RateNow>,
    ) -> Self {
        Self {
            at,
            concurrency,
            keys,
            rates,
        }
    }

    /// The keys counted under `limit` (a [`ConcurrencyNow::limit`]).
    pub fn keys_of<'a>(&'a self, limit: &'a str) -> impl Iterator<Item = &'a KeyNow> + 'a {
        self.keys.iter().filter(move |k| k.limit == limit)
    }
}

/// A concurrency limit in force (a `flow_limits` row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConcurrencyNow {
    /// `workflow:<W>` (the workflow's slots), `key:<W>` (the slots of each
    /// concurrency key `k` of the workflow, counted as `key:<W>:<k>`) or
    /// `queue:<Q>`.
    pub limit: String,
    /// The workflow that declared it; `None` for a queue's.
    pub workflow: Option<String>,
    /// Slots at most, per key.
    pub max_in_flight: i64,
    /// What holds a slot: an in-progress step, or the run from its first
    /// claimed step until it ends or pauses.
    #[serde(serialize_with = "holder_str")]
    pub holder: SlotHolder,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn holder_str<S: serde::Serializer>(holder: &SlotHolder, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(holder.as_str())
}

impl ConcurrencyNow {
    /// A limit (for a store outside this crate).
    #[must_use]
    pub const fn new(
        limit: String,
        workflow: Option<String>,
        max_in_flight: i64,
        holder: SlotHolder,
    ) -> Self {
        Self {
            limit,
            workflow,
            max_in_flight,
            holder,
        }
    }
}

/// One concurrency key now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeyNow {
    /// The key slots are counted under: the limit's own for `workflow:` and
    /// `queue:`, `key:<W>:<k>` for a per-key limit.
    pub key: String,
    /// The limit it counts under ([`ConcurrencyNow::limit`]).
    pub limit: String,
    /// Slots held: the runs holding it, each once (by a step in progress or
    /// as a run).
    pub in_flight: i64,
    /// Rows held back by it (`scheduled` or `waiting`, out of the due
    /// index until one of its slots is given back).
    pub held: i64,
}

impl KeyNow {
    /// A key's use (for a store outside this crate).
    #[must_use]
    pub const fn new(key: String, limit: String, in_flight: i64, held: i64) -> Self {
        Self {
            key,
            limit,
            in_flight,
            held,
        }
    }
}

/// A rate limit in force (a `rate_limits` row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RateNow {
    /// `workflow:<W>`, `step:<W>/<s>` or `key:<W>` (one window per
    /// concurrency key `k`, `key:<W>:<k>`).
    pub limit: String,
    /// The workflow that declared it.
    pub workflow: String,
    /// Step starts allowed per window.
    pub max_starts: i64,
    /// The window, ms.
    pub period_ms: i64,
    /// Step starts inside the window ending now, for a limit of one window
    /// (`workflow:`, `step:`); `None` for a per-key rate, whose windows are
    /// not listed.
    pub starts_in_window: Option<i64>,
}

impl RateNow {
    /// A rate (for a store outside this crate).
    #[must_use]
    pub const fn new(
        limit: String,
        workflow: String,
        (max_starts, period_ms): (i64, i64),
        starts_in_window: Option<i64>,
    ) -> Self {
        Self {
            limit,
            workflow,
            max_starts,
            period_ms,
            starts_in_window,
        }
    }
}
