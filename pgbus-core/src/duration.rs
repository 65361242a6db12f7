//! The duration grammar shared by `#[step(wait = "...")]`, `timeout`, `wait_timeout`
//! and the `wait` of a reattempt policy.
//!
//! A duration is one or more `<digits><unit>` parts written without spaces, units
//! from largest to smallest and each at most once:
//!
//! | unit | meaning      |
//! |------|--------------|
//! | `d`  | 24 hours     |
//! | `h`  | hour         |
//! | `m`  | minute       |
//! | `s`  | second       |
//! | `ms` | millisecond  |
//!
//! Accepted: `250ms`, `5s`, `1m30s`, `1h30m`, `2h`, `1d`, `0s`. Rejected, each with
//! its own message: the empty string, a bare number (`5`), a sign (`-1s`), an unknown
//! unit (`5x`), a fraction (`1.5s`, `1.5.2s`), a repeated or out-of-order unit
//! (`5s1m`), and anything over [`MAX_DURATION_MS`].
//!
//! The grammar is deliberately narrower than general-purpose parsers (humantime,
//! jiff's friendly format): those accept fractions, spaces, signs and long unit
//! names, and their messages are not shaped for a compile error on a literal.

use std::fmt;

/// The longest duration the grammar accepts: 36,500 days (about 100 years), in
/// milliseconds. Longer values would push due times past what a Postgres
/// `timestamptz` holds once added to the clock.
pub const MAX_DURATION_MS: u64 = 36_500 * DAY_MS;

const SECOND_MS: u64 = 1_000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

/// Units from largest to smallest, with their size in milliseconds.
const UNITS: [(&str, u64); 5] = [
    ("d", DAY_MS),
    ("h", HOUR_MS),
    ("m", MINUTE_MS),
    ("s", SECOND_MS),
    ("ms", 1),
];

/// Why a duration string was rejected. `Display` gives the rule and the fix, in
/// the diagnostic shape the macros use (lowercase, code in backticks).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationError {
    /// The string was empty or only whitespace.
    Empty,
    /// A number with no unit after it, e.g. `5`.
    MissingUnit {
        /// The digits that had no unit.
        number: String,
        /// The unit most likely meant: the one after the previous part's unit
        /// (`1h30` -> `m`), or `s` for a lone number.
        likely: &'static str,
    },
    /// A unit with no number before it, e.g. `s`.
    MissingNumber {
        /// The unit that had no number.
        unit: String,
    },
    /// A leading `-` or `+`.
    Signed,
    /// A `.` anywhere: fractions are not part of the grammar.
    Fraction,
    /// Letters that are not one of `d`, `h`, `m`, `s`, `ms`.
    UnknownUnit {
        /// The letters found.
        unit: String,
    },
    /// A character that is neither a digit nor a unit letter (spaces included).
    UnexpectedChar {
        /// The character found.
        found: char,
    },
    /// A unit that repeats or comes after a smaller one, e.g. `5s1m` or `1s2s`.
    UnitOrder {
        /// The unit out of place.
        unit: String,
    },
    /// More than [`MAX_DURATION_MS`].
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str(
                "a duration cannot be empty; write digits and a unit (`ms`, `s`, `m`, `h`, `d`), e.g. `5s`",
            ),
            Self::MissingUnit { number, likely } => write!(
                f,
                "`{number}` has no unit; add one of `ms`, `s`, `m`, `h`, `d`, e.g. `{number}{likely}`"
            ),
            Self::MissingNumber { unit } => write!(
                f,
                "unit `{unit}` has no number before it; write e.g. `5{unit}`"
            ),
            Self::Signed => f.write_str(
                "a duration cannot carry a sign; durations are never negative, write e.g. `5s`",
            ),
            Self::Fraction => f.write_str(
                "fractions are not supported; use a smaller unit, e.g. `1500ms` for one and a half seconds",
            ),
            Self::UnknownUnit { unit } => write!(
                f,
                "unknown duration unit `{unit}`; use `ms`, `s`, `m`, `h` or `d`"
            ),
            Self::UnexpectedChar { found } => write!(
                f,
                "unexpected character {found:?} in a duration; write digits and units with no spaces, e.g. `1m30s`"
            ),
            Self::UnitOrder { unit } => write!(
                f,
                "unit `{unit}` repeats or comes after a smaller unit; write units from largest to smallest, each once, e.g. `1h30m`"
            ),
            Self::TooLong => f.write_str(
                "duration is too long; the longest accepted is `36500d` (about 100 years)",
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration in the grammar above and returns it in milliseconds.
///
/// # Errors
/// A [`DurationError`] naming the first rule the input breaks.
///
/// ```
/// use pgbus_core::parse_duration_ms;
/// assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
/// assert_eq!(parse_duration_ms("250ms"), Ok(250));
/// assert!(parse_duration_ms("5").is_err());
/// ```
pub fn parse_duration_ms(input: &str) -> Result<u64, DurationError> {
    if input.trim().is_empty() {
        return Err(DurationError::Empty);
    }
    if input.starts_with(['-', '+']) {
        return Err(DurationError::Signed);
    }
    if input.contains('.') {
        return Err(DurationError::Fraction);
    }

    let mut rest = input;
    let mut total: u64 = 0;
    // Index into UNITS of the smallest unit seen so far; the next must be smaller.
    let mut next_allowed = 0;
    while !rest.is_empty() {
        let digits_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, after) = rest.split_at(digits_len);
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after_unit) = after.split_at(unit_len);

        if digits.is_empty() {
            if unit.is_empty() {
                // Neither a digit nor a letter: report the character itself.
                let found = after.chars().next().unwrap_or(' ');
                return Err(DurationError::UnexpectedChar { found });
            }
            if UNITS.iter().any(|(name, _)| *name == unit) {
                return Err(DurationError::MissingNumber {
                    unit: unit.to_owned(),
                });
            }
            return Err(DurationError::UnknownUnit {
                unit: unit.to_owned(),
            });
        }
        if unit.is_empty() {
            if after.is_empty() {
                let likely = match next_allowed {
                    0 => "s",
                    n => UNITS.get(n).map_or("ms", |(name, _)| *name),
                };
                return Err(DurationError::MissingUnit {
                    number: digits.to_owned(),
                    likely,
                });
            }
            let found = after.chars().next().unwrap_or(' ');
            return Err(DurationError::UnexpectedChar { found });
        }

        let Some(position) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_owned(),
            });
        };
        if position < next_allowed {
            return Err(DurationError::UnitOrder {
                unit: unit.to_owned(),
            });
        }
        next_allowed = position + 1;

        let size = UNITS[position].1;
        let part = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(size))
            .ok_or(DurationError::TooLong)?;
        total = total.checked_add(part).ok_or(DurationError::TooLong)?;
        rest = after_unit;
    }

    if total > MAX_DURATION_MS {
        return Err(DurationError::TooLong);
    }
    Ok(total)
}

/// Writes milliseconds back in the grammar, largest units first (`90000` -> `1m30s`,
/// `0` -> `0s`). `parse_duration_ms(&format_duration_ms(n)) == Ok(n)` for every
/// `n <= MAX_DURATION_MS`.
#[must_use]
pub fn format_duration_ms(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (name, size) in UNITS {
        let count = rest / size;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(name);
            rest %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests;
