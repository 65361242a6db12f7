//! Times as the pages show them: the absolute time (UTC, to the
//! millisecond, as everywhere in pgbus) and beside it how long ago, or how
//! soon, it is from the page's "now", the database's clock when the page was
//! read (the clock the stored times are on).

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use crate::commands::time;

/// `at` as an absolute time in a `<time>` element, with how long before or
/// after `now` it is beside it.
pub(crate) fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    let absolute = time(at);
    html! {
        time datetime=(absolute) title=(absolute) { (absolute) }
        " " span.ago { (ago(at, now)) }
    }
}

/// [`when`] for a time that may be missing (`-`).
pub(crate) fn maybe(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Markup {
    match at {
        Some(at) => when(at, now),
        None => html! { "-" },
    }
}

/// How long before `now` `at` is, in its largest whole unit: "just now"
/// within a second either way, "42 s ago", "3 min ago", "5 h ago",
/// "2 days ago"; a time after `now` is "in 3 min".
pub(crate) fn ago(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let ms = (now - at).num_milliseconds();
    let secs = ms.unsigned_abs() / 1000;
    if secs == 0 {
        return "just now".to_owned();
    }
    let amount = match secs {
        ..60 => format!("{secs} s"),
        60..3_600 => format!("{} min", secs / 60),
        3_600..86_400 => format!("{} h", secs / 3_600),
        86_400..172_800 => "1 day".to_owned(),
        _ => format!("{} days", secs / 86_400),
    };
    if ms > 0 {
        format!("{amount} ago")
    } else {
        format!("in {amount}")
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone as _, Utc};

    use super::{ago, when};

    #[test]
    fn relative_times_take_their_largest_whole_unit() {
        let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let before = |ms: i64| ago(now - TimeDelta::milliseconds(ms), now);
        assert_eq!(before(0), "just now");
        assert_eq!(before(999), "just now");
        assert_eq!(before(-999), "just now", "a clock a little ahead");
        assert_eq!(before(1_000), "1 s ago");
        assert_eq!(before(59_999), "59 s ago");
        assert_eq!(before(60_000), "1 min ago");
        assert_eq!(
            before(3 * 60_000 + 59_000),
            "3 min ago",
            "whole units, down"
        );
        assert_eq!(before(3_599_999), "59 min ago");
        assert_eq!(before(3_600_000), "1 h ago");
        assert_eq!(before(23 * 3_600_000 + 3_599_000), "23 h ago");
        assert_eq!(before(86_400_000), "1 day ago");
        assert_eq!(before(2 * 86_400_000 - 1), "1 day ago");
        assert_eq!(before(2 * 86_400_000), "2 days ago");
        assert_eq!(before(400 * 86_400_000), "400 days ago");
        assert_eq!(before(-90_000), "in 1 min", "a deadline or a next tick");
        assert_eq!(before(-3 * 86_400_000), "in 3 days");
    }

    #[test]
    fn a_time_shows_absolute_in_a_time_element_and_relative_beside_it() {
        let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
        let html = when(now - TimeDelta::minutes(3), now).into_string();
        assert_eq!(
            html,
            "<time datetime=\"2026-12-03T11:57:00.000Z\" title=\"2026-12-03T11:57:00.000Z\">\
             2026-12-03T11:57:00.000Z</time> <span class=\"ago\">3 min ago</span>"
        );
        assert_eq!(super::maybe(None, now).into_string(), "-");
    }
}
