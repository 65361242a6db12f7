use super::*;
use proptest::prelude::*;

#[test]
fn accepts_the_documented_forms() {
    assert_eq!(parse_duration_ms("250ms"), Ok(250));
    assert_eq!(parse_duration_ms("5s"), Ok(5_000));
    assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
    assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
    assert_eq!(parse_duration_ms("2h"), Ok(7_200_000));
    assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
    assert_eq!(parse_duration_ms("0s"), Ok(0));
    assert_eq!(parse_duration_ms("1d2h3m4s5ms"), Ok(93_784_005));
    assert_eq!(parse_duration_ms("36500d"), Ok(MAX_DURATION_MS));
}

#[test]
fn rejects_each_bad_form_with_its_own_reason() {
    let cases: &[(&str, DurationError)] = &[
        ("", DurationError::Empty),
        ("   ", DurationError::Empty),
        (
            "5",
            DurationError::MissingUnit {
                number: "5".into(),
                likely: "s",
            },
        ),
        (
            "1m30",
            DurationError::MissingUnit {
                number: "30".into(),
                likely: "s",
            },
        ),
        (
            "1h30",
            DurationError::MissingUnit {
                number: "30".into(),
                likely: "m",
            },
        ),
        (
            "1s500",
            DurationError::MissingUnit {
                number: "500".into(),
                likely: "ms",
            },
        ),
        ("-1s", DurationError::Signed),
        ("+1s", DurationError::Signed),
        ("5x", DurationError::UnknownUnit { unit: "x".into() }),
        ("5sec", DurationError::UnknownUnit { unit: "sec".into() }),
        ("1.5s", DurationError::Fraction),
        ("1.5.2s", DurationError::Fraction),
        ("s", DurationError::MissingNumber { unit: "s".into() }),
        (
            "soon",
            DurationError::UnknownUnit {
                unit: "soon".into(),
            },
        ),
        ("5s1m", DurationError::UnitOrder { unit: "m".into() }),
        ("1s2s", DurationError::UnitOrder { unit: "s".into() }),
        ("5 s", DurationError::UnexpectedChar { found: ' ' }),
        ("5s ", DurationError::UnexpectedChar { found: ' ' }),
        ("36501d", DurationError::TooLong),
        ("99999999999999999999s", DurationError::TooLong),
        ("18446744073709551615d", DurationError::TooLong),
    ];
    for (input, expected) in cases {
        assert_eq!(
            parse_duration_ms(input).as_ref(),
            Err(expected),
            "input {input:?}"
        );
    }
}

#[test]
fn every_rejection_reads_as_a_diagnostic() {
    for input in [
        "",
        "5",
        "-1s",
        "5x",
        "1.5.2s",
        "s",
        "5s1m",
        "5 s",
        "99999999999999999999s",
    ] {
        let message = parse_duration_ms(input).unwrap_err().to_string();
        let first = message.chars().next().unwrap();
        assert!(!first.is_uppercase(), "{input:?}: {message}");
        assert!(
            message.contains('`'),
            "{input:?} gives no example or code: {message}"
        );
        assert!(!message.ends_with('.'), "{input:?}: {message}");
    }
}

#[test]
fn formats_back_into_the_grammar() {
    assert_eq!(format_duration_ms(0), "0s");
    assert_eq!(format_duration_ms(90_000), "1m30s");
    assert_eq!(format_duration_ms(93_784_005), "1d2h3m4s5ms");
}

proptest! {
    #[test]
    fn round_trips_every_value_in_range(ms in 0..=MAX_DURATION_MS) {
        prop_assert_eq!(parse_duration_ms(&format_duration_ms(ms)), Ok(ms));
    }

    #[test]
    fn parts_add_up(d in 0u64..100, h in 0u64..100, m in 0u64..100, s in 0u64..100, milli in 0u64..5000) {
        let text = format!("{d}d{h}h{m}m{s}s{milli}ms");
        let expected = d * DAY_MS + h * HOUR_MS + m * MINUTE_MS + s * SECOND_MS + milli;
        prop_assert_eq!(parse_duration_ms(&text), Ok(expected));
    }

    #[test]
    fn never_panics_and_never_exceeds_the_maximum(input in "\\PC{0,24}") {
        if let Ok(ms) = parse_duration_ms(&input) {
            prop_assert!(ms <= MAX_DURATION_MS);
        }
    }

    #[test]
    fn a_bare_number_is_always_rejected(n in any::<u64>()) {
        prop_assert!(parse_duration_ms(&n.to_string()).is_err());
    }

    #[test]
    fn a_sign_is_always_rejected(n in 0u64..1_000_000, unit in "(ms|s|m|h|d)") {
        let negative = format!("-{n}{unit}");
        prop_assert_eq!(parse_duration_ms(&negative), Err(DurationError::Signed));
    }
}
