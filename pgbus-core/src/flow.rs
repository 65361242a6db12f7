//! Flow control words shared by `#[workflow(concurrency = .., rate_limit = ..,
//! deadline = ..)]`, `#[step(rate_limit = ..)]` and the runtime: the rate
//! grammar, who holds a concurrency slot, and what a missed deadline does.
//!
//! A rate is `<count>/<duration>`, the duration in the grammar of
//! [`crate::duration`]: `10/1s` is at most ten step starts in any one-second
//! window, `100/1m`, `5/250ms`. The count is 1 to [`MAX_RATE_COUNT`] and the
//! period 1 ms to [`MAX_RATE_PERIOD_MS`]; each part of a bad rate gets its
//! own message.

use std::fmt;

use crate::duration::{DurationError, parse_duration_ms};

/// The largest count of a rate. The store keeps the start times of the last
/// `count` starts of each rate key (a sliding log, exact in every window), so
/// the count bounds that row's size: 1,000 times is 8 KB. A higher rate is
/// written with a shorter period (`1000/1s`, not `10000/10s`).
pub const MAX_RATE_COUNT: u32 = 1_000;

/// The longest period of a rate: one day, in milliseconds.
pub const MAX_RATE_PERIOD_MS: u64 = 24 * 60 * 60 * 1_000;

/// The largest concurrency limit: a limit counts rows the store locks and
/// counts at each claim, and a fleet never runs more at once than this.
pub const MAX_CONCURRENCY: u32 = 100_000;

/// At most `count` step starts in any window of `period_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Starts allowed per window, 1 to [`MAX_RATE_COUNT`].
    pub count: u32,
    /// The window, in milliseconds, 1 to [`MAX_RATE_PERIOD_MS`].
    pub period_ms: u64,
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.count,
            crate::duration::format_duration_ms(self.period_ms)
        )
    }
}

/// Why a rate did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateError {
    /// No `/` between count and period.
    NoSlash,
    /// The count is not a whole number.
    BadCount(String),
    /// The count is 0.
    ZeroCount,
    /// The count is over [`MAX_RATE_COUNT`].
    CountTooLarge(u64),
    /// The period is not a duration.
    BadPeriod(DurationError),
    /// The period is 0.
    ZeroPeriod,
    /// The period is over [`MAX_RATE_PERIOD_MS`].
    PeriodTooLong(u64),
}

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSlash => f.write_str(
                "a rate is `<count>/<period>`, e.g. `10/1s` (at most 10 step starts in any second)",
            ),
            Self::BadCount(count) => write!(
                f,
                "the count of a rate is a whole number, e.g. `10/1s`; `{count}` is not"
            ),
            Self::ZeroCount => f.write_str(
                "a rate of 0 would never start a step; remove the rate limit, or allow at least 1",
            ),
            Self::CountTooLarge(count) => write!(
                f,
                "a rate allows at most {MAX_RATE_COUNT} starts per period ({count} given); \
                 write a shorter period instead, e.g. `1000/1s` rather than `10000/10s`"
            ),
            Self::BadPeriod(error) => write!(f, "the period of a rate: {error}"),
            Self::ZeroPeriod => f.write_str("the period of a rate must be at least 1ms"),
            Self::PeriodTooLong(ms) => write!(
                f,
                "the period of a rate is at most 1d ({} given)",
                crate::duration::format_duration_ms(*ms)
            ),
        }
    }
}

impl std::error::Error for RateError {}

/// Parses `<count>/<duration>`.
///
/// # Errors
/// A [`RateError`] naming the part that is wrong.
pub fn parse_rate(input: &str) -> Result<Rate, RateError> {
    let (count, period) = input.split_once('/').ok_or(RateError::NoSlash)?;
    let count: u64 = if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RateError::BadCount(count.to_owned()));
    } else {
        count
            .parse()
            .map_err(|_| RateError::CountTooLarge(u64::MAX))?
    };
    if count == 0 {
        return Err(RateError::ZeroCount);
    }
    let count = u32::try_from(count)
        .ok()
        .filter(|c| *c <= MAX_RATE_COUNT)
        .ok_or(RateError::CountTooLarge(count))?;
    let period_ms = parse_duration_ms(period).map_err(RateError::BadPeriod)?;
    if period_ms == 0 {
        return Err(RateError::ZeroPeriod);
    }
    if period_ms > MAX_RATE_PERIOD_MS {
        return Err(RateError::PeriodTooLong(period_ms));
    }
    Ok(Rate { count, period_ms })
}

/// What holds a workflow's concurrency slot (`#[workflow(slot = "step" | "run")]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SlotHolder {
    /// A slot is held while one of the run's steps is in progress, and
    /// given back between steps (the default: a run parked for a signal or a
    /// long `wait` holds nothing).
    #[default]
    Step,
    /// A slot is taken by the run's first claimed step and held until the run
    /// finishes, is cancelled or pauses: a mutex over the whole run.
    Run,
}

impl SlotHolder {
    /// Every spelling, in documentation order.
    pub const ALL: &'static [&'static str] = &["step", "run"];

    /// The word as written and stored: `step` or `run`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Step => "step",
            Self::Run => "run",
        }
    }

    /// The holder a word names.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "step" => Some(Self::Step),
            "run" => Some(Self::Run),
            _ => None,
        }
    }
}

/// What a run past its deadline becomes (`on_deadline = "cancel" | "pause"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeadlineAction {
    /// Cancelled, with its fan-out children (the default).
    #[default]
    Cancel,
    /// Paused, for an operator to resume or cancel.
    Pause,
}

impl DeadlineAction {
    /// Every spelling, in documentation order.
    pub const ALL: &'static [&'static str] = &["cancel", "pause"];

    /// The word as written and stored: `cancel` or `pause`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Pause => "pause",
        }
    }

    /// The action a word names.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "cancel" => Some(Self::Cancel),
            "pause" => Some(Self::Pause),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print_back() {
        assert_eq!(
            parse_rate("10/1s"),
            Ok(Rate {
                count: 10,
                period_ms: 1_000
            })
        );
        assert_eq!(
            parse_rate("5/250ms").map(|r| r.to_string()).as_deref(),
            Ok("5/250ms")
        );
        assert_eq!(parse_rate("1000/1d").map(|r| r.period_ms), Ok(86_400_000));
    }

    #[test]
    fn each_bad_part_of_a_rate_has_its_error() {
        assert_eq!(parse_rate("10"), Err(RateError::NoSlash));
        assert_eq!(parse_rate("/1s"), Err(RateError::BadCount(String::new())));
        assert_eq!(parse_rate("-1/1s"), Err(RateError::BadCount("-1".into())));
        assert_eq!(parse_rate("0/1s"), Err(RateError::ZeroCount));
        assert_eq!(parse_rate("1001/1s"), Err(RateError::CountTooLarge(1001)));
        assert!(matches!(
            parse_rate("99999999999999999999/1s"),
            Err(RateError::CountTooLarge(_))
        ));
        assert!(matches!(parse_rate("10/1"), Err(RateError::BadPeriod(_))));
        assert_eq!(parse_rate("10/0s"), Err(RateError::ZeroPeriod));
        assert_eq!(
            parse_rate("10/2d"),
            Err(RateError::PeriodTooLong(172_800_000))
        );
    }

    #[test]
    fn words_round_trip() {
        for holder in [SlotHolder::Step, SlotHolder::Run] {
            assert_eq!(SlotHolder::parse(holder.as_str()), Some(holder));
        }
        for action in [DeadlineAction::Cancel, DeadlineAction::Pause] {
            assert_eq!(DeadlineAction::parse(action.as_str()), Some(action));
        }
        assert!(
            SlotHolder::ALL
                .iter()
                .all(|w| SlotHolder::parse(w).is_some())
        );
        assert!(
            DeadlineAction::ALL
                .iter()
                .all(|w| DeadlineAction::parse(w).is_some())
        );
        assert_eq!(SlotHolder::parse("steps"), None);
        assert_eq!(DeadlineAction::parse("skip"), None);
    }
}
