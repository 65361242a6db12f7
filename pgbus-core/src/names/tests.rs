use super::*;

/// The reason for `name`, or `None` when it is accepted.
fn reason(name: &str) -> Option<&'static str> {
    check_signal_name(name).err()
}

#[test]
fn accepts_ordinary_names() {
    for name in [
        "a",
        "payment.settled",
        "order shipped",
        "café-über/ß",
        "注文.確定",
        "emoji 🎉 inside",
    ] {
        assert_eq!(check_signal_name(name), Ok(()), "{name:?}");
    }
}

#[test]
fn rejects_empty_and_blank_names() {
    for name in ["", " ", "   ", "\u{3000}"] {
        assert_eq!(
            reason(name),
            Some("a signal name cannot be empty or only whitespace"),
            "{name:?}"
        );
    }
}

#[test]
fn counts_characters_not_bytes() {
    let too_long = Some("a signal name is at most 255 characters");
    assert_eq!(MAX_SIGNAL_NAME_CHARS, 255);
    assert!(too_long.is_some_and(|r| r.contains(&MAX_SIGNAL_NAME_CHARS.to_string())));

    assert_eq!(reason(&"a".repeat(255)), None);
    assert_eq!(reason(&"a".repeat(256)), too_long);
    // Two bytes each: 255 characters is 510 bytes and still fits.
    assert_eq!(reason(&"é".repeat(255)), None);
    assert_eq!(reason(&"é".repeat(256)), too_long);
    // Four bytes each.
    assert_eq!(reason(&"🎉".repeat(255)), None);
    assert_eq!(reason(&"🎉".repeat(256)), too_long);
    // The 272-character name a step could once wait for forever.
    assert_eq!(reason(&"x".repeat(272)), too_long);
}

#[test]
fn rejects_whitespace_at_either_end() {
    let ends = Some("a signal name cannot start or end with whitespace");
    assert_eq!(reason(" a"), ends);
    assert_eq!(reason("a "), ends);
    assert_eq!(reason("\u{a0}a"), ends);
    assert_eq!(reason("a\u{3000}"), ends);
    assert_eq!(reason("a b"), None);
}

#[test]
fn rejects_control_characters_anywhere() {
    let control = Some("a signal name cannot hold control characters (tabs, newlines, NUL)");
    for name in [
        "a\0b", "a\tb", "a\nb", "\ta", "a\r", "a\u{7f}", "a\u{85}b", "a\u{1b}",
    ] {
        assert_eq!(reason(name), control, "{name:?}");
    }
}

#[test]
fn rejects_every_invisible_range_at_both_ends_and_inside() {
    let ranges = [
        ('\u{200b}', '\u{200f}'),
        ('\u{202a}', '\u{202e}'),
        ('\u{2060}', '\u{2064}'),
        ('\u{2066}', '\u{2069}'),
        ('\u{feff}', '\u{feff}'),
        ('\u{00ad}', '\u{00ad}'),
    ];
    for (first, last) in ranges {
        for c in first..=last {
            assert!(is_invisible(c), "U+{:04X}", u32::from(c));
            for name in [format!("{c}a"), format!("a{c}"), format!("a{c}b")] {
                let got = reason(&name);
                assert!(
                    got.is_some_and(|r| r.contains("invisible")),
                    "U+{:04X} in {name:?}: {got:?}",
                    u32::from(c)
                );
            }
        }
    }
}

#[test]
fn is_invisible_stops_at_the_range_edges() {
    for c in [
        '\u{200a}', '\u{2010}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{2065}', '\u{206a}',
        '\u{fefe}', '\u{ff00}', '\u{00ac}', '\u{00ae}', 'a', ' ', '\n',
    ] {
        assert!(!is_invisible(c), "U+{:04X}", u32::from(c));
    }
}

#[test]
fn agrees_with_the_invisible_predicate_on_single_characters() {
    // One character surrounded by letters: rejected exactly when it is a control
    // or invisible character.
    for code in 0..=0x3000_u32 {
        let Some(c) = char::from_u32(code) else {
            continue;
        };
        let ok = check_signal_name(&format!("a{c}b")).is_ok();
        assert_eq!(ok, !(c.is_control() || is_invisible(c)), "U+{code:04X}");
    }
}
