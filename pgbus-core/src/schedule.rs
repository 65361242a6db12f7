//! Schedules: a cron expression with seconds in an IANA time zone, read the
//! same way by `#[workflow(schedule = "...")]` at compile time and by the
//! runtime when a schedule is created, updated or fired.
//!
//! - [`Cron::parse`] checks an expression and a zone and returns the value
//!   whose [`Cron::next_after`] gives the tick after an instant.
//! - [`CatchUp`] is what a schedule does about ticks it missed while no worker
//!   fired it.
//! - [`check_schedule_name`] is the rule for a schedule's name.
//!
//! # The expression
//!
//! Six fields, `second minute hour day-of-month month day-of-week`
//! (`"0 */5 * * * *"`: every five minutes), or the classic five without the
//! seconds (`"*/5 * * * *"`, the second then being `0`), parsed by the
//! [`croner`] crate: `*`, lists, ranges, steps, month and weekday names,
//! `L`, `W` and `#`, and the nicknames `@hourly`, `@daily`, `@weekly`,
//! `@monthly`, `@yearly`. When both the day of month and the day of week are
//! restricted, a day matching either fires (as Vixie cron does). No year
//! field.
//!
//! An expression that parses but can never fire (`"0 0 0 31 2 *"`, the 31st of
//! February) is refused: [`Cron::parse`] looks for a tick within
//! [`NEVER_FIRES_HORIZON_YEARS`] years of 2000-01-01 (every expression that fires
//! at all fires at least once in any eight years, a 29th of February included).
//!
//! # Time zones and daylight saving
//!
//! The zone is an IANA name (`"Europe/Berlin"`, `"UTC"`), from the time zone
//! database that `chrono-tz` compiles in, so a host without `/usr/share/zoneinfo`
//! reads it the same. A **tick** is a wall-clock time in that zone that the
//! expression matches, and it fires once, at one instant:
//!
//! - in a **gap** (spring forward: in Berlin, 02:00 to 02:59:59 on the last
//!   Sunday of March never happen), a tick fires at the first instant after the
//!   gap (03:00 local). Several ticks in one gap share that instant, so they
//!   are one tick there: a minutely schedule fires once at 03:00, not 61 times;
//! - in an **overlap** (fall back: 02:00 to 02:59:59 happen twice on the last
//!   Sunday of October), a tick fires at its first occurrence only; during the
//!   second pass through the hour the schedule does not fire. A schedule that
//!   must fire every n seconds of real time, whatever the clocks say, belongs
//!   in UTC.
//!
//! (croner's own answer differs for interval expressions, which skip the gap
//! and fire in both passes of an overlap: the search runs on the wall clock and
//! the rule above maps it to instants; see docs/decisions.md, "Schedules".)

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// How far [`Cron::parse`] looks for a first tick before it calls an expression
/// one that never fires, in years from 2000-01-01T00:00:00.
pub const NEVER_FIRES_HORIZON_YEARS: i32 = 10;

/// The longest schedule name accepted, in characters.
pub const MAX_SCHEDULE_NAME_CHARS: usize = 200;

/// The longest cron expression accepted, in characters.
pub const MAX_EXPRESSION_CHARS: usize = 200;

/// The default bound of [`CatchUp::All`]: `"all"` alone means `"all(100)"`.
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 100;

/// The largest bound [`CatchUp::All`] takes.
pub const MAX_CATCH_UP_LIMIT: u32 = 1_000;

/// The zone of a schedule that names none.
pub const DEFAULT_ZONE: &str = "UTC";

/// How much of a refused expression or zone an error quotes, in characters
/// (the rest is cut with `…`): an error about a megabyte of text is not a
/// megabyte long.
pub const MAX_QUOTED_CHARS: usize = 64;

/// `text` cut to [`MAX_QUOTED_CHARS`] characters, with `…` when cut.
#[must_use]
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Why an expression, a zone, a catch-up policy or a name was refused. Each
/// variant names the field it is about ([`ScheduleError::field`]): `schedule`
/// (the expression), `timezone`, `catch_up` or `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The expression does not parse.
    Expression {
        /// The expression as written (cut to [`MAX_QUOTED_CHARS`]).
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The expression parses but matches no time within
    /// [`NEVER_FIRES_HORIZON_YEARS`] years.
    NeverFires {
        /// The expression as written.
        expression: String,
    },
    /// The zone is not an IANA time zone name.
    Zone {
        /// The zone as written (cut to [`MAX_QUOTED_CHARS`]).
        zone: String,
        /// A close name, when one is.
        suggestion: Option<&'static str>,
    },
    /// The catch-up policy is not `skip`, `one`, `all` or `all(N)`.
    CatchUp {
        /// The policy as written (cut to [`MAX_QUOTED_CHARS`]).
        found: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The schedule's name breaks [`check_schedule_name`].
    Name {
        /// The rule it breaks.
        reason: &'static str,
    },
}

impl ScheduleError {
    /// The option or field the error is about: `schedule`, `timezone`,
    /// `catch_up` or `name`.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            Self::Expression { .. } | Self::NeverFires { .. } => "schedule",
            Self::Zone { .. } => "timezone",
            Self::CatchUp { .. } => "catch_up",
            Self::Name { .. } => "name",
        }
    }
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expression { expression, reason } => write!(
                f,
                "`schedule`: `{expression}` is not a cron expression ({reason}); expected six \
                 fields `second minute hour day-of-month month day-of-week`, e.g. `0 */5 * * * *`"
            ),
            Self::NeverFires { expression } => write!(
                f,
                "`schedule`: `{expression}` never fires (no time matches it within \
                 {NEVER_FIRES_HORIZON_YEARS} years); check the day of month against the month"
            ),
            Self::Zone { zone, suggestion } => {
                write!(
                    f,
                    "`timezone`: `{zone}` is not an IANA time zone name, e.g. `Europe/Berlin` or `UTC`"
                )?;
                if let Some(suggestion) = suggestion {
                    write!(f, "; did you mean `{suggestion}`?")?;
                }
                Ok(())
            }
            Self::CatchUp { found, reason } => write!(
                f,
                "`catch_up`: `{found}` {reason}; expected `skip`, `one`, `all` or `all(N)` \
                 with N from 1 to {MAX_CATCH_UP_LIMIT}"
            ),
            Self::Name { reason } => write!(f, "`name`: {reason}"),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// A checked cron expression in a time zone: what a schedule fires on.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use pgbus_core::schedule::Cron;
///
/// let cron = Cron::parse("0 30 9 * * MON-FRI", "Europe/Berlin").unwrap();
/// let friday = Utc.with_ymd_and_hms(2026, 1, 2, 12, 0, 0).unwrap();
/// // The next weekday at 09:30 in Berlin (UTC+1 in winter): Monday 08:30 UTC.
/// assert_eq!(
///     cron.next_after(friday),
///     Some(Utc.with_ymd_and_hms(2026, 1, 5, 8, 30, 0).unwrap())
/// );
/// assert!(Cron::parse("0 0 0 31 2 *", "UTC").is_err()); // never fires
/// assert!(Cron::parse("* * * * * *", "Europe/Berlín").is_err()); // no such zone
/// ```
#[derive(Clone)]
pub struct Cron {
    expression: String,
    zone: Tz,
    parsed: croner::Cron,
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cron")
            .field("expression", &self.expression)
            .field("zone", &self.zone.name())
            .finish_non_exhaustive()
    }
}

impl PartialEq for Cron {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression && self.zone == other.zone
    }
}

impl Cron {
    /// Checks `expression` (see the module docs) and `zone` (an IANA name) and
    /// returns the schedule they describe.
    ///
    /// # Errors
    /// [`ScheduleError::Expression`] for an expression that does not parse
    /// (or is longer than [`MAX_EXPRESSION_CHARS`]),
    /// [`ScheduleError::NeverFires`] for one that matches nothing,
    /// [`ScheduleError::Zone`] for a zone that does not exist. The zone is
    /// checked first.
    pub fn parse(expression: &str, zone: &str) -> Result<Self, ScheduleError> {
        let zone = parse_zone(zone)?;
        let parsed = parse_expression(expression)?;
        let schedule = Self {
            expression: expression.to_owned(),
            zone,
            parsed,
        };
        let start = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single();
        let found = start.and_then(|start| {
            let end = Utc
                .with_ymd_and_hms(2000 + NEVER_FIRES_HORIZON_YEARS, 1, 1, 0, 0, 0)
                .single()?;
            schedule.next_after(start).filter(|tick| *tick <= end)
        });
        if found.is_none() {
            return Err(ScheduleError::NeverFires {
                expression: expression.to_owned(),
            });
        }
        Ok(schedule)
    }

    /// The expression as written.
    #[must_use]
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone's IANA name.
    #[must_use]
    pub fn zone(&self) -> &'static str {
        self.zone.name()
    }

    /// The first tick strictly after `after`, as an instant (see the module
    /// docs for the rule in a daylight-saving gap or overlap); `None` when
    /// there is none before the year 5000 (croner's search limit).
    #[must_use]
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone).naive_local();
        // Wall-clock times are searched as if on a UTC clock: no gaps, no folds.
        let (mut from, mut inclusive) = (local.and_utc(), false);
        if let LocalResult::Ambiguous(earlier, _) = self.zone.from_local_datetime(&local)
            && earlier.with_timezone(&Utc) < after
        {
            // `after` is on the second pass of an overlap: every wall time
            // until its end fired on the first pass already.
            from = end_of_overlap(self.zone, local)?.and_utc();
            inclusive = true;
        }
        // A wall time never maps before its predecessor's instant, so this ends
        // within a few steps; the bound is a guard, not a expectation.
        for _ in 0..10_000 {
            let wall = self.parsed.find_next_occurrence(&from, inclusive).ok()?;
            let instant = instant_of(self.zone, wall.naive_utc())?;
            if instant > after {
                return Some(instant);
            }
            (from, inclusive) = (wall, false);
        }
        None
    }

    /// Up to `limit` ticks strictly after `after` and at or before `until`,
    /// oldest first.
    #[must_use]
    pub fn ticks_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut ticks = Vec::new();
        let mut last = after;
        while ticks.len() < limit {
            match self.next_after(last) {
                Some(tick) if tick <= until => {
                    ticks.push(tick);
                    last = tick;
                }
                _ => break,
            }
        }
        ticks
    }
}

/// The expression's parser: seconds optional (five fields mean second 0), no
/// year field, day of month and day of week OR-ed.
fn parse_expression(expression: &str) -> Result<croner::Cron, ScheduleError> {
    let refuse = |reason: String| ScheduleError::Expression {
        expression: quoted(expression),
        reason,
    };
    if expression.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(refuse(format!(
            "longer than {MAX_EXPRESSION_CHARS} characters"
        )));
    }
    if expression
        .chars()
        .any(|c| c.is_control() || crate::is_invisible(c))
    {
        return Err(refuse(
            "it holds control or invisible characters".to_owned(),
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(expression)
        .map_err(|error| refuse(describe(&error)))
}

/// croner's error in our words: lowercase, no trailing period.
fn describe(error: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    let text = match error {
        E::EmptyPattern => "it is empty".to_owned(),
        E::InvalidPattern(message) | E::IllegalCharacters(message) | E::ComponentError(message) => {
            message.clone()
        }
        other => other.to_string(),
    };
    let text = text.trim_end_matches('.');
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// An IANA zone by its exact name.
fn parse_zone(zone: &str) -> Result<Tz, ScheduleError> {
    Tz::from_str(zone).map_err(|_| ScheduleError::Zone {
        zone: quoted(zone),
        suggestion: closest_zone(zone),
    })
}

/// Checks an IANA zone name.
///
/// # Errors
/// [`ScheduleError::Zone`], with the closest name when one is close.
pub fn check_zone(zone: &str) -> Result<(), ScheduleError> {
    parse_zone(zone).map(|_| ())
}

/// The zone name closest to `found` (case aside, or within a few edits).
fn closest_zone(found: &str) -> Option<&'static str> {
    // No zone name is 40 characters long, so none is within three edits of a
    // longer text; and the edit distance costs its length times each name's,
    // so a megabyte of text would take minutes of CPU to compare.
    if found.chars().count() > 40 {
        return None;
    }
    let lower = found.to_lowercase();
    if let Some(zone) = chrono_tz::TZ_VARIANTS
        .iter()
        .find(|zone| zone.name().to_lowercase() == lower)
    {
        return Some(zone.name());
    }
    chrono_tz::TZ_VARIANTS
        .iter()
        .map(|zone| {
            (
                strsim::levenshtein(&lower, &zone.name().to_lowercase()),
                zone,
            )
        })
        .filter(|(distance, _)| *distance <= 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, zone)| zone.name())
}

/// The instant a tick at wall time `wall` fires at: the time itself; the first
/// of its two instants in an overlap; the first instant after a gap.
fn instant_of(zone: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&wall) {
        LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => Some(at.with_timezone(&Utc)),
        LocalResult::None => {
            let after_gap = first_wall_time(wall, |w| {
                !matches!(zone.from_local_datetime(w), LocalResult::None)
            })?;
            match zone.from_local_datetime(&after_gap) {
                LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => {
                    Some(at.with_timezone(&Utc))
                }
                LocalResult::None => None,
            }
        }
    }
}

/// The first wall time after `wall` (in an overlap) that happens only once.
fn end_of_overlap(zone: Tz, wall: NaiveDateTime) -> Option<NaiveDateTime> {
    first_wall_time(wall, |w| {
        !matches!(zone.from_local_datetime(w), LocalResult::Ambiguous(..))
    })
}

/// The first whole-second wall time after `from` for which `done` holds, when
/// it holds from some point within two days on and stays so (the end of a gap
/// or an overlap): minute steps, then halving down to the second.
fn first_wall_time(
    from: NaiveDateTime,
    done: impl Fn(&NaiveDateTime) -> bool,
) -> Option<NaiveDateTime> {
    let step = Duration::minutes(1);
    let mut before = from;
    let mut after = None;
    for _ in 0..(2 * 24 * 60) {
        let next = before.checked_add_signed(step)?;
        if done(&next) {
            after = Some(next);
            break;
        }
        before = next;
    }
    let mut after = after?;
    // `before` is not done, `after` is: halve the span down to a second.
    while after.signed_duration_since(before) > Duration::seconds(1) {
        let half = after.signed_duration_since(before) / 2;
        let middle = before.checked_add_signed(Duration::seconds(half.num_seconds()))?;
        if done(&middle) {
            after = middle;
        } else {
            before = middle;
        }
    }
    Some(after)
}

/// What a schedule does about ticks it missed: ticks still unfired when a
/// worker finds the oldest of them later than the missed-tick threshold (no
/// worker fired the schedule for a while: a deploy, an outage). Ticks found in
/// time each start their run whatever the policy.
///
/// Written `skip`, `one`, `all` or `all(N)`; `all` alone is `all(100)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CatchUp {
    /// No run for the missed ticks; the schedule goes on with its next tick
    /// after now (Quartz's "do nothing" misfire instruction).
    Skip,
    /// One run for all of them, at the latest missed tick (its tick time is
    /// that tick's); then the next tick after now (Quartz's "fire once now").
    /// The default: a daily job whose tick fell into a deploy still runs.
    #[default]
    One,
    /// A run for each missed tick, but at most the latest `N` of them, oldest
    /// first; earlier ones are skipped (Temporal's catch-up window, counted in
    /// ticks). 1 to [`MAX_CATCH_UP_LIMIT`].
    All(u32),
}

impl CatchUp {
    /// The policy's words, as `catch_up = "..."` takes them, in documentation
    /// order.
    pub const WORDS: &'static [&'static str] = &["skip", "one", "all", "all(N)"];

    /// The bound of `All`, or `None`.
    #[must_use]
    pub const fn limit(self) -> Option<u32> {
        match self {
            Self::All(limit) => Some(limit),
            Self::Skip | Self::One => None,
        }
    }
}

impl fmt::Display for CatchUp {
    /// The stored form: `skip`, `one`, `all(N)` (always with its bound).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Skip => f.write_str("skip"),
            Self::One => f.write_str("one"),
            Self::All(limit) => write!(f, "all({limit})"),
        }
    }
}

impl FromStr for CatchUp {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |reason: String| ScheduleError::CatchUp {
            found: quoted(text),
            reason,
        };
        match text {
            "skip" => return Ok(Self::Skip),
            "one" => return Ok(Self::One),
            "all" => return Ok(Self::All(DEFAULT_CATCH_UP_LIMIT)),
            _ => {}
        }
        let Some(inner) = text
            .strip_prefix("all(")
            .and_then(|rest| rest.strip_suffix(')'))
        else {
            return Err(refuse(
                match crate::vocab::closest(text, ["skip", "one", "all"]) {
                    Some(word) => format!("is not a policy (did you mean `{word}`?)"),
                    None => "is not a policy".to_owned(),
                },
            ));
        };
        match inner.trim().parse::<u32>() {
            Ok(limit) if (1..=MAX_CATCH_UP_LIMIT).contains(&limit) => Ok(Self::All(limit)),
            Ok(_) => Err(refuse(format!(
                "has a bound out of range (the largest is `all({MAX_CATCH_UP_LIMIT})`)"
            ))),
            Err(_) => Err(refuse("has a bound that is not a whole number".to_owned())),
        }
    }
}

/// Checks a schedule's name: 1 to [`MAX_SCHEDULE_NAME_CHARS`] characters, no
/// control or invisible formatting characters, no whitespace at either end
/// (the rules of a signal name, shorter).
///
/// # Errors
/// [`ScheduleError::Name`] naming the first rule broken.
pub fn check_schedule_name(name: &str) -> Result<(), ScheduleError> {
    let reason = if name.trim().is_empty() {
        Some("a schedule name cannot be empty or only whitespace")
    } else if name.chars().count() > MAX_SCHEDULE_NAME_CHARS {
        Some("a schedule name is at most 200 characters")
    } else if name.chars().any(char::is_control) {
        Some("a schedule name cannot hold control characters (tabs, newlines, NUL)")
    } else if name.chars().any(crate::is_invisible) {
        Some("a schedule name cannot hold invisible formatting characters")
    } else if name.trim() != name {
        Some("a schedule name cannot start or end with whitespace")
    } else {
        None
    };
    reason.map_or(Ok(()), |reason| Err(ScheduleError::Name { reason }))
}

#[cfg(test)]
mod tests;
