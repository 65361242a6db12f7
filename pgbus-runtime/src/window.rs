//! The time windows operators look at runs through (`1h`, `24h`, `7d`, `30d`),
//! their buckets, and their capping at the retention age. Pure, so the
//! command-line tool, a dashboard and the statistics query agree on them.
//!
//! A window ends now and reaches back its span; it is cut in buckets of a
//! fixed size (5 minutes, 1 hour, 6 hours, 1 day) aligned on the Unix epoch
//! (a day bucket starts at midnight UTC), the first bucket holding the
//! window's start. Runs older than the retention age are deleted, so a window
//! longer than it is cut to it, and says so.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

/// A window ending now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Window {
    /// The last hour, in 5-minute buckets.
    #[serde(rename = "1h")]
    Hour,
    /// The last 24 hours, in 1-hour buckets.
    #[serde(rename = "24h")]
    Day,
    /// The last 7 days, in 6-hour buckets.
    #[serde(rename = "7d")]
    Week,
    /// The last 30 days, in 1-day buckets.
    #[serde(rename = "30d")]
    Month,
}

/// Every window, shortest first.
pub const WINDOWS: [Window; 4] = [Window::Hour, Window::Day, Window::Week, Window::Month];

impl Window {
    /// How far back it reaches.
    #[must_use]
    pub const fn span(self) -> Duration {
        match self {
            Self::Hour => Duration::from_hours(1),
            Self::Day => Duration::from_hours(24),
            Self::Week => Duration::from_hours(7 * 24),
            Self::Month => Duration::from_hours(30 * 24),
        }
    }

    /// The size of its buckets.
    #[must_use]
    pub const fn bucket(self) -> Duration {
        match self {
            Self::Hour => Duration::from_mins(5),
            Self::Day => Duration::from_hours(1),
            Self::Week => Duration::from_hours(6),
            Self::Month => Duration::from_hours(24),
        }
    }

    /// Its name: `1h`, `24h`, `7d` or `30d`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::Day => "24h",
            Self::Week => "7d",
            Self::Month => "30d",
        }
    }

    /// The window ending at `now`, cut to `retention` (how long ended runs
    /// are kept; `None` keeps them forever) when that is shorter.
    #[must_use]
    pub fn at(self, now: DateTime<Utc>, retention: Option<Duration>) -> Range {
        let span = self.span();
        let (reach, capped) = match retention {
            Some(kept) if kept < span => (kept, true),
            _ => (span, false),
        };
        let from = now - delta(reach);
        let bucket = self.bucket();
        Range {
            window: self,
            from,
            to: now,
            bucket,
            first_bucket: floor(from, bucket),
            capped,
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A window name other than `1h`, `24h`, `7d` or `30d`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown window `{0}`: use 1h, 24h, 7d or 30d")]
pub struct UnknownWindow(pub String);

impl FromStr for Window {
    type Err = UnknownWindow;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WINDOWS
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| UnknownWindow(s.to_owned()))
    }
}

/// A window placed in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Range {
    /// The window asked for.
    pub window: Window,
    /// Where it starts (after capping).
    pub from: DateTime<Utc>,
    /// Where it ends: now.
    pub to: DateTime<Utc>,
    /// The bucket size (in JSON: `bucket_ms`, milliseconds).
    #[serde(rename = "bucket_ms", serialize_with = "as_millis")]
    pub bucket: Duration,
    /// The start of the bucket holding `from`.
    pub first_bucket: DateTime<Utc>,
    /// Whether the retention age cut it short.
    pub capped: bool,
}

impl Range {
    /// The start of every bucket, oldest first: from the one holding `from`
    /// to the one holding `to`.
    #[must_use]
    pub fn buckets(&self) -> Vec<DateTime<Utc>> {
        let step = delta(self.bucket);
        let mut starts = Vec::new();
        let mut at = self.first_bucket;
        while at <= self.to {
            starts.push(at);
            at += step;
        }
        starts
    }

    /// The start of the bucket holding `at`.
    #[must_use]
    pub fn bucket_of(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        floor(at, self.bucket)
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn as_millis<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// `at` rounded down to a multiple of `size` since the Unix epoch.
fn floor(at: DateTime<Utc>, size: Duration) -> DateTime<Utc> {
    let size_ms = i64::try_from(size.as_millis()).unwrap_or(i64::MAX).max(1);
    let ms = at.timestamp_millis();
    DateTime::<Utc>::from_timestamp_millis(ms - ms.rem_euclid(size_ms)).unwrap_or(at)
}

fn delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a valid time")
            .with_timezone(&Utc)
    }

    #[test]
    fn windows_parse_from_their_names_and_nothing_else() {
        for window in WINDOWS {
            assert_eq!(window.as_str().parse::<Window>(), Ok(window));
            assert_eq!(window.to_string(), window.as_str());
        }
        for bad in ["", "2h", "1H", "24 h", "7days", "1d", "30d "] {
            let error = bad.parse::<Window>().expect_err(bad);
            assert_eq!(
                error.to_string(),
                format!("unknown window `{bad}`: use 1h, 24h, 7d or 30d")
            );
        }
    }

    #[test]
    fn each_window_has_its_bucket_size_and_count() {
        let now = at("2026-12-01T10:17:00Z");
        let sizes: Vec<(u64, usize)> = WINDOWS
            .into_iter()
            .map(|w| {
                let range = w.at(now, None);
                (range.bucket.as_secs(), range.buckets().len())
            })
            .collect();
        // One more bucket than span / size: the first holds the window's
        // start partway through, the last holds now.
        assert_eq!(sizes, [(300, 13), (3_600, 25), (21_600, 29), (86_400, 31)]);
    }

    #[test]
    fn buckets_are_aligned_on_the_epoch() {
        let range = Window::Hour.at(at("2026-12-01T10:17:30Z"), None);
        assert_eq!(range.from, at("2026-12-01T09:17:30Z"));
        assert_eq!(range.first_bucket, at("2026-12-01T09:15:00Z"));
        let buckets = range.buckets();
        assert_eq!(buckets.first(), Some(&at("2026-12-01T09:15:00Z")));
        assert_eq!(buckets.last(), Some(&at("2026-12-01T10:15:00Z")));
        assert_eq!(
            range.bucket_of(at("2026-12-01T09:59:59Z")),
            at("2026-12-01T09:55:00Z")
        );
        // Day buckets start at midnight UTC; 6-hour ones at 0, 6, 12, 18 h.
        let month = Window::Month.at(at("2026-12-01T10:17:30Z"), None);
        assert_eq!(month.first_bucket, at("2026-11-01T00:00:00Z"));
        let week = Window::Week.at(at("2026-12-01T10:17:30Z"), None);
        assert_eq!(week.first_bucket, at("2026-11-24T06:00:00Z"));
        // On a boundary, the bucket starts there.
        let exact = Window::Day.at(at("2026-12-01T10:00:00Z"), None);
        assert_eq!(exact.first_bucket, at("2026-11-30T10:00:00Z"));
        assert_eq!(exact.buckets().len(), 25);
    }

    #[test]
    fn a_range_serializes_its_bucket_in_milliseconds() {
        let range = Window::Day.at(at("2026-12-01T10:00:00Z"), None);
        let json = serde_json::to_value(range).expect("serializes");
        assert_eq!(json["bucket_ms"], 3_600_000);
        assert_eq!(json["window"], "24h");
        assert_eq!(json["capped"], false);
    }

    #[test]
    fn a_window_longer_than_the_retention_age_is_cut_and_says_so() {
        let now = at("2026-12-01T10:00:00Z");
        let week = Duration::from_hours(7 * 24);
        let month = Window::Month.at(now, Some(week));
        assert!(month.capped);
        assert_eq!(month.from, at("2026-11-24T10:00:00Z"));
        assert_eq!(
            month.bucket,
            Window::Month.bucket(),
            "the bucket size stays"
        );
        assert_eq!(month.buckets().len(), 8);
        // Equal or longer retention, or none: not cut.
        assert!(!Window::Week.at(now, Some(week)).capped);
        assert!(!Window::Hour.at(now, Some(week)).capped);
        assert!(!Window::Month.at(now, None).capped);
        assert_eq!(Window::Month.at(now, None).from, at("2026-11-01T10:00:00Z"));
    }
}
