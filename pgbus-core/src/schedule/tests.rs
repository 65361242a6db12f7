use chrono::{DateTime, TimeZone, Utc};

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn cron(expression: &str, zone: &str) -> Cron {
    Cron::parse(expression, zone).unwrap()
}

#[test]
fn six_fields_have_seconds_and_five_mean_second_zero() {
    let every_second = cron("* * * * * *", "UTC");
    let at = utc(2026, 1, 1, 0, 0, 0);
    assert_eq!(every_second.next_after(at), Some(utc(2026, 1, 1, 0, 0, 1)));
    let every_five = cron("0 */5 * * * *", "UTC");
    assert_eq!(every_five.next_after(at), Some(utc(2026, 1, 1, 0, 5, 0)));
    let classic = cron("*/5 * * * *", "UTC");
    assert_eq!(classic.next_after(at), Some(utc(2026, 1, 1, 0, 5, 0)));
    assert_eq!(
        cron("@hourly", "UTC").next_after(at),
        Some(utc(2026, 1, 1, 1, 0, 0))
    );
}

#[test]
fn next_after_is_strictly_after_even_within_a_second() {
    let every_second = cron("* * * * * *", "UTC");
    let half = utc(2026, 1, 1, 0, 0, 0) + chrono::Duration::milliseconds(500);
    assert_eq!(
        every_second.next_after(half),
        Some(utc(2026, 1, 1, 0, 0, 1))
    );
}

#[test]
fn a_bad_expression_names_the_schedule_field() {
    for bad in [
        "",
        "* * *",
        "61 * * * * *",
        "* * * * * * * *",
        "0 0 25 * * *",
        "a b c d e f",
    ] {
        let error = Cron::parse(bad, "UTC").unwrap_err();
        assert_eq!(error.field(), "schedule", "{bad}");
        assert!(
            matches!(error, ScheduleError::Expression { .. }),
            "{bad}: {error:?}"
        );
        assert!(error.to_string().starts_with("`schedule`: "), "{error}");
    }
}

#[test]
fn an_expression_that_never_fires_is_refused() {
    for never in ["0 0 0 31 2 *", "0 0 0 30 2 *", "0 0 0 31 4 *"] {
        let error = Cron::parse(never, "UTC").unwrap_err();
        assert_eq!(
            error,
            ScheduleError::NeverFires {
                expression: never.to_owned()
            }
        );
        assert!(error.to_string().contains("never fires"), "{error}");
    }
    // The 29th of February fires every four years (eight around 2100).
    let leap = cron("0 0 0 29 2 *", "UTC");
    assert_eq!(
        leap.next_after(utc(2097, 1, 1, 0, 0, 0)),
        Some(utc(2104, 2, 29, 0, 0, 0))
    );
}

#[test]
fn a_zone_that_does_not_exist_names_the_timezone_field() {
    let error = Cron::parse("* * * * * *", "Europe/Berlín").unwrap_err();
    assert_eq!(error.field(), "timezone");
    assert_eq!(
        error,
        ScheduleError::Zone {
            zone: "Europe/Berlín".to_owned(),
            suggestion: Some("Europe/Berlin"),
        }
    );
    assert!(error.to_string().contains("did you mean `Europe/Berlin`?"));
    let lower = Cron::parse("* * * * * *", "europe/berlin").unwrap_err();
    assert!(matches!(
        lower,
        ScheduleError::Zone {
            suggestion: Some("Europe/Berlin"),
            ..
        }
    ));
    let nothing = Cron::parse("* * * * * *", "Mars/Olympus").unwrap_err();
    assert_eq!(nothing.field(), "timezone");
    assert!(check_zone("America/New_York").is_ok());
    assert!(check_zone("").is_err());
}

#[test]
fn a_zone_moves_wall_clock_ticks() {
    let berlin = cron("0 30 9 * * *", "Europe/Berlin");
    // Winter: UTC+1; summer: UTC+2.
    assert_eq!(
        berlin.next_after(utc(2026, 1, 10, 0, 0, 0)),
        Some(utc(2026, 1, 10, 8, 30, 0))
    );
    assert_eq!(
        berlin.next_after(utc(2026, 7, 10, 0, 0, 0)),
        Some(utc(2026, 7, 10, 7, 30, 0))
    );
}

/// Berlin springs forward on 2026-03-29 at 01:00 UTC: 02:00 local becomes 03:00.
#[test]
fn a_daily_tick_in_a_gap_fires_once_at_the_end_of_the_gap() {
    let daily = cron("0 30 2 * * *", "Europe/Berlin");
    let ticks = daily.ticks_between(utc(2026, 3, 27, 12, 0, 0), utc(2026, 3, 31, 12, 0, 0), 10);
    assert_eq!(
        ticks,
        [
            utc(2026, 3, 28, 1, 30, 0), // 02:30 CET
            utc(2026, 3, 29, 1, 0, 0),  // 02:30 does not exist: 03:00 CEST
            utc(2026, 3, 30, 0, 30, 0), // 02:30 CEST
            utc(2026, 3, 31, 0, 30, 0),
        ]
    );
}

#[test]
fn hourly_and_minutely_ticks_in_a_gap_fire_once_at_its_end() {
    let hourly = cron("0 30 * * * *", "Europe/Berlin");
    let ticks = hourly.ticks_between(utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 2, 0, 0), 10);
    assert_eq!(
        ticks,
        [
            utc(2026, 3, 29, 0, 30, 0), // 01:30 CET
            utc(2026, 3, 29, 1, 0, 0),  // 02:30 is in the gap: 03:00 CEST
            utc(2026, 3, 29, 1, 30, 0), // 03:30 CEST
        ]
    );
    let minutely = cron("0 * * * * *", "Europe/Berlin");
    let ticks = minutely.ticks_between(utc(2026, 3, 29, 0, 58, 0), utc(2026, 3, 29, 1, 2, 0), 10);
    assert_eq!(
        ticks,
        [
            utc(2026, 3, 29, 0, 59, 0), // 01:59 CET
            utc(2026, 3, 29, 1, 0, 0),  // 02:00..02:59 and 03:00 CEST: one tick
            utc(2026, 3, 29, 1, 1, 0),
            utc(2026, 3, 29, 1, 2, 0),
        ]
    );
}

/// Berlin falls back on 2026-10-25 at 01:00 UTC: 03:00 CEST becomes 02:00 CET,
/// so 02:00..02:59:59 local happen at 00:00Z..00:59:59Z and again at
/// 01:00Z..01:59:59Z.
#[test]
fn a_daily_tick_in_an_overlap_fires_once_at_its_first_occurrence() {
    let daily = cron("0 30 2 * * *", "Europe/Berlin");
    let ticks = daily.ticks_between(utc(2026, 10, 23, 12, 0, 0), utc(2026, 10, 27, 12, 0, 0), 10);
    assert_eq!(
        ticks,
        [
            utc(2026, 10, 24, 0, 30, 0), // 02:30 CEST
            utc(2026, 10, 25, 0, 30, 0), // 02:30 CEST, the first of two
            utc(2026, 10, 26, 1, 30, 0), // 02:30 CET
            utc(2026, 10, 27, 1, 30, 0),
        ]
    );
}

#[test]
fn hourly_and_minutely_ticks_in_an_overlap_fire_once() {
    let hourly = cron("0 30 * * * *", "Europe/Berlin");
    let ticks = hourly.ticks_between(utc(2026, 10, 24, 23, 0, 0), utc(2026, 10, 25, 3, 0, 0), 10);
    assert_eq!(
        ticks,
        [
            utc(2026, 10, 24, 23, 30, 0), // 01:30 CEST
            utc(2026, 10, 25, 0, 30, 0),  // 02:30 CEST
            // 02:30 CET (01:30Z) is the same wall time again: not fired
            utc(2026, 10, 25, 2, 30, 0), // 03:30 CET
        ]
    );
    let minutely = cron("0 * * * * *", "Europe/Berlin");
    let ticks = minutely.ticks_between(
        utc(2026, 10, 24, 23, 0, 0),
        utc(2026, 10, 25, 3, 0, 0),
        1000,
    );
    // Four hours of real time, one of which repeats wall times: 119 ticks
    // from 01:01 CEST to 02:59 CEST, none from 02:00 to 02:59 CET, then 61
    // from 03:00 CET (02:00Z) to 04:00 CET.
    assert_eq!(ticks.len(), 119 + 61);
    assert_eq!(ticks[118], utc(2026, 10, 25, 0, 59, 0));
    assert_eq!(ticks[119], utc(2026, 10, 25, 2, 0, 0));
    // From inside the second pass, the next tick is after it.
    assert_eq!(
        minutely.next_after(utc(2026, 10, 25, 1, 15, 30)),
        Some(utc(2026, 10, 25, 2, 0, 0))
    );
}

#[test]
fn new_york_gap_and_overlap() {
    // 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z.
    let daily = cron("0 30 2 * * *", "America/New_York");
    assert_eq!(
        daily.next_after(utc(2026, 3, 8, 0, 0, 0)),
        Some(utc(2026, 3, 8, 7, 0, 0))
    );
    let hourly = cron("0 0 * * * *", "America/New_York");
    let ticks = hourly.ticks_between(utc(2026, 3, 8, 5, 30, 0), utc(2026, 3, 8, 8, 0, 0), 10);
    // 01:00 EST, (02:00 does not exist) 03:00 EDT, 04:00 EDT.
    assert_eq!(
        ticks,
        [
            utc(2026, 3, 8, 6, 0, 0),
            utc(2026, 3, 8, 7, 0, 0),
            utc(2026, 3, 8, 8, 0, 0)
        ]
    );
    // 2026-11-01 02:00 EDT -> 01:00 EST at 06:00Z: 01:xx happens at 05:xxZ and 06:xxZ.
    let daily = cron("0 30 1 * * *", "America/New_York");
    let ticks = daily.ticks_between(utc(2026, 10, 31, 12, 0, 0), utc(2026, 11, 2, 12, 0, 0), 10);
    assert_eq!(
        ticks,
        [utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0)]
    );
    let ticks = hourly.ticks_between(utc(2026, 11, 1, 4, 30, 0), utc(2026, 11, 1, 8, 0, 0), 10);
    // 01:00 EDT (05:00Z); 01:00 EST (06:00Z) is not fired; 02:00 EST (07:00Z).
    assert_eq!(
        ticks,
        [
            utc(2026, 11, 1, 5, 0, 0),
            utc(2026, 11, 1, 7, 0, 0),
            utc(2026, 11, 1, 8, 0, 0)
        ]
    );
}

#[test]
fn every_second_across_both_transitions_never_repeats_an_instant() {
    let every_second = cron("* * * * * *", "Europe/Berlin");
    for (from, until) in [
        (utc(2026, 3, 29, 0, 59, 0), utc(2026, 3, 29, 1, 1, 0)),
        (utc(2026, 10, 25, 0, 59, 0), utc(2026, 10, 25, 2, 1, 0)),
    ] {
        let ticks = every_second.ticks_between(from, until, 10_000);
        assert!(ticks.windows(2).all(|pair| pair[0] < pair[1]));
    }
    // The second pass of the overlap has no tick.
    let ticks = every_second.ticks_between(
        utc(2026, 10, 25, 0, 59, 58),
        utc(2026, 10, 25, 2, 0, 2),
        10_000,
    );
    assert_eq!(
        ticks,
        [
            utc(2026, 10, 25, 0, 59, 59),
            utc(2026, 10, 25, 2, 0, 0),
            utc(2026, 10, 25, 2, 0, 1),
            utc(2026, 10, 25, 2, 0, 2),
        ]
    );
}

#[test]
fn catch_up_reads_and_prints_its_words() {
    assert_eq!("skip".parse(), Ok(CatchUp::Skip));
    assert_eq!("one".parse(), Ok(CatchUp::One));
    assert_eq!("all".parse(), Ok(CatchUp::All(DEFAULT_CATCH_UP_LIMIT)));
    assert_eq!("all(7)".parse(), Ok(CatchUp::All(7)));
    assert_eq!(CatchUp::All(7).to_string(), "all(7)");
    assert_eq!(CatchUp::default(), CatchUp::One);
    for policy in [
        CatchUp::Skip,
        CatchUp::One,
        CatchUp::All(1),
        CatchUp::All(1000),
    ] {
        assert_eq!(policy.to_string().parse(), Ok(policy));
    }
    for bad in ["", "sikp", "all(0)", "all(1001)", "all(x)", "all(", "ALL"] {
        let error = bad.parse::<CatchUp>().unwrap_err();
        assert_eq!(error.field(), "catch_up", "{bad}");
        assert!(error.to_string().starts_with("`catch_up`: "), "{error}");
    }
    assert!(
        "sikp"
            .parse::<CatchUp>()
            .unwrap_err()
            .to_string()
            .contains("did you mean `skip`?")
    );
}

#[test]
fn schedule_names() {
    assert!(check_schedule_name("reports.daily").is_ok());
    for bad in ["", "  ", " x", "a\nb", "a\u{200b}b"] {
        assert_eq!(check_schedule_name(bad).unwrap_err().field(), "name");
    }
    assert!(check_schedule_name(&"x".repeat(201)).is_err());
    assert!(check_schedule_name(&"x".repeat(200)).is_ok());
}

#[test]
fn a_huge_refused_value_is_quoted_cut_and_not_compared_to_every_zone() {
    // A megabyte of zone: no did-you-mean (comparing it with ~600 names by
    // edit distance took minutes of CPU), and the error quotes 64 characters.
    let huge = "Europe/Berlin".repeat(80_000);
    let error = Cron::parse("* * * * * *", &huge).unwrap_err();
    assert!(
        matches!(&error, ScheduleError::Zone { suggestion: None, zone } if zone.chars().count() == MAX_QUOTED_CHARS + 1),
        "{error:?}"
    );
    assert!(error.to_string().len() < 400, "{error}");
    // A near miss still gets its suggestion.
    assert!(matches!(
        Cron::parse("* * * * * *", "Europe/Berln"),
        Err(ScheduleError::Zone {
            suggestion: Some("Europe/Berlin"),
            ..
        })
    ));
    let error = Cron::parse(&"1 ".repeat(100_000), "UTC").unwrap_err();
    assert_eq!(error.field(), "schedule");
    assert!(error.to_string().len() < 400, "{error}");
    let error = "x".repeat(100_000).parse::<CatchUp>().unwrap_err();
    assert_eq!(error.field(), "catch_up");
    assert!(error.to_string().len() < 400, "{error}");
    assert_eq!(quoted("ünïcödé"), "ünïcödé");
}
