//! What the pgbus macros and the pgbus runtime must agree on, in one place.
//!
//! A proc-macro crate cannot share code with the runtime it expands into, so
//! everything both sides read or write lives here:
//!
//! - [`duration`]: the duration grammar of `wait = "1h30m"` and friends;
//! - [`digest`]: the definition digest stored on every run;
//! - [`flow`]: the rate grammar of `rate_limit = "10/1s"`, who holds a
//!   concurrency slot, and what a missed deadline does;
//! - [`names`]: the signal name rules of `wait_for` and `Client::signal`, and the
//!   invisible characters no name may hold;
//! - [`rules`]: the value rules of options (a `timeout` over zero, a queue, a
//!   priority, a concurrency limit), applied by the macro to the source and by
//!   the runtime to a deployment's overrides;
//! - [`schedule`]: cron expressions, time zones and catch-up policies of
//!   schedules, and the tick rule in daylight-saving gaps and overlaps;
//! - [`vocab`]: the words the DSL accepts (actions, report modes, option names)
//!   and the did-you-mean used in diagnostics.
//!
//! Users reach these types through `pgbus_runtime`, which re-exports them.

pub mod defaults;
pub mod digest;
pub mod duration;
pub mod flow;
pub mod names;
pub mod rules;
pub mod schedule;
pub mod vocab;

pub use digest::{DIGEST_HEX_LEN, definition_digest, entries_json, sha256_hex};
pub use duration::format_duration_ms;
pub use duration::{DurationError, MAX_DURATION_MS, parse_duration_ms};
pub use flow::{DeadlineAction, Rate, RateError, SlotHolder, parse_rate};
pub use names::{MAX_SIGNAL_NAME_CHARS, check_signal_name, is_invisible};
pub use vocab::{
    EntryKind, ExceptionAction, FailureAction, OnTimeout, Report, UnknownWord, backticked, closest,
    did_you_mean,
};
