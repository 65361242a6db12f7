//! The value rules of a workflow's and a step's options, shared by the
//! `#[workflow]` macro (which checks what the source says) and the runtime's
//! per-deployment overrides (which check what a deployment says at
//! registration): one rule, one message, wherever the value comes from.
//!
//! Each check returns the normalized value, or the message the macro shows
//! at the offending literal: lowercase, the option in backticks, the rule and
//! the fix. Duration and rate *grammar* is [`crate::duration`] and
//! [`crate::flow`]; these are the rules on the values they read.

use crate::flow::MAX_CONCURRENCY;

/// Why a `timeout` of zero is refused.
pub const TIMEOUT_ZERO: &str =
    "`timeout` must be greater than zero; leave it out to use the runtime's stall threshold";

/// Why a `wait_timeout` of zero is refused.
pub const WAIT_TIMEOUT_ZERO: &str =
    "`wait_timeout` must be greater than zero; leave it out to wait without a limit";

/// Why a `wait_timeout` on a step that waits for no signal is refused.
pub const WAIT_TIMEOUT_NEEDS_WAIT_FOR: &str =
    "`wait_timeout` needs `wait_for`: it limits how long the step waits for a signal";

/// Why a `deadline` of zero is refused.
pub const DEADLINE_ZERO: &str = "`deadline` must be greater than zero: a run would be past it as it starts; \
     leave it out for no deadline";

/// A step's `timeout`, in milliseconds: greater than zero (zero would stall
/// every attempt as it starts).
///
/// ```
/// assert_eq!(pgbus_core::rules::check_timeout_ms(5_000), Ok(5_000));
/// assert!(pgbus_core::rules::check_timeout_ms(0).is_err());
/// ```
///
/// # Errors
/// [`TIMEOUT_ZERO`].
pub const fn check_timeout_ms(ms: u64) -> Result<u64, &'static str> {
    if ms == 0 { Err(TIMEOUT_ZERO) } else { Ok(ms) }
}

/// A step's `wait_timeout`, in milliseconds: greater than zero. Where it may
/// be written (only beside `wait_for`) is [`check_wait_timeout_place`].
///
/// # Errors
/// [`WAIT_TIMEOUT_ZERO`].
pub const fn check_wait_timeout_ms(ms: u64) -> Result<u64, &'static str> {
    if ms == 0 {
        Err(WAIT_TIMEOUT_ZERO)
    } else {
        Ok(ms)
    }
}

/// Whether a `wait_timeout` may apply to a step: only to one that waits for a
/// signal (`wait_for`).
///
/// # Errors
/// [`WAIT_TIMEOUT_NEEDS_WAIT_FOR`] when `waits_for_signal` is false.
pub const fn check_wait_timeout_place(waits_for_signal: bool) -> Result<(), &'static str> {
    if waits_for_signal {
        Ok(())
    } else {
        Err(WAIT_TIMEOUT_NEEDS_WAIT_FOR)
    }
}

/// A workflow's `deadline`, in milliseconds: greater than zero.
///
/// # Errors
/// [`DEADLINE_ZERO`].
pub const fn check_deadline_ms(ms: u64) -> Result<u64, &'static str> {
    if ms == 0 { Err(DEADLINE_ZERO) } else { Ok(ms) }
}

/// A `queue` of a workflow or a step: not empty, no whitespace or control
/// characters.
///
/// ```
/// assert_eq!(pgbus_core::rules::check_queue("orders_eu"), Ok(()));
/// assert!(pgbus_core::rules::check_queue("orders eu").is_err());
/// ```
///
/// # Errors
/// The rule broken, with the fix.
pub fn check_queue(queue: &str) -> Result<(), &'static str> {
    if queue.is_empty() {
        return Err("`queue` cannot be empty; leave it out to use `\"default\"`");
    }
    if queue.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("`queue` cannot contain whitespace; use e.g. `\"orders_eu\"`");
    }
    Ok(())
}

/// A `priority` of a workflow or a step: fits `i16`; lower numbers run
/// first.
///
/// ```
/// assert_eq!(pgbus_core::rules::check_priority(-5), Ok(-5));
/// assert!(pgbus_core::rules::check_priority(40_000).is_err());
/// ```
///
/// # Errors
/// The range, when `value` is outside it.
pub fn check_priority(value: i128) -> Result<i16, String> {
    i16::try_from(value).map_err(|_| {
        format!(
            "`priority` must fit in `i16` ({} to {}); lower numbers run first",
            i16::MIN,
            i16::MAX
        )
    })
}

/// A concurrency limit (`concurrency` or `key_concurrency`, named by
/// `option`): a whole number of slots from 1 to [`MAX_CONCURRENCY`].
///
/// ```
/// assert_eq!(pgbus_core::rules::check_concurrency("concurrency", 4), Ok(4));
/// assert!(pgbus_core::rules::check_concurrency("concurrency", 0).is_err());
/// ```
///
/// # Errors
/// Which bound `value` is past, naming `option`.
pub fn check_concurrency(option: &str, value: i128) -> Result<u32, String> {
    if value < 0 {
        return Err(format!(
            "`{option}` cannot be negative: it takes a whole number of slots from 1 to \
             {MAX_CONCURRENCY}, or leave it out for no limit"
        ));
    }
    if value == 0 {
        return Err(format!(
            "a limit of 0 would never run a step; `{option}` takes 1 to {MAX_CONCURRENCY}, \
             or leave it out for no limit"
        ));
    }
    u32::try_from(value)
        .ok()
        .filter(|limit| *limit <= MAX_CONCURRENCY)
        .ok_or_else(|| {
            format!(
                "`{option}` is at most {MAX_CONCURRENCY} ({value} given); leave it out for no limit"
            )
        })
}

#[cfg(test)]
mod tests;
