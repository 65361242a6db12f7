use super::*;
use EntryKind::{FanOut, Removed, Step};

#[test]
fn matches_the_published_vectors() {
    assert_eq!(
        definition_digest([]),
        "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
    );
    assert_eq!(
        definition_digest([("a", Step)]),
        "33a1211403190e00a90fd43ec535d3d609601507c64102da06e348edd2160a35"
    );
    assert_eq!(
        definition_digest([("charge", Step), ("notify", FanOut)]),
        "a0a59deaaccc54caa9a4fb72eca65699f1816abb12ad12348d49c37ed7f92629"
    );
}

#[test]
fn encodes_names_as_standard_compact_json() {
    assert_eq!(entries_json([]), "[]");
    assert_eq!(
        entries_json([("charge", Step), ("notify", FanOut), ("old", Removed)]),
        r#"[["charge","step"],["notify","fan_out"],["old","removed"]]"#
    );
    // Quotes and backslashes are escaped; non-ASCII letters are written as UTF-8.
    assert_eq!(
        entries_json([("say \"hi\"\\", Step), ("café_über", Step)]),
        r#"[["say \"hi\"\\","step"],["café_über","step"]]"#
    );
    assert_eq!(
        entries_json([("tab\there", Step)]),
        r#"[["tab\there","step"]]"#
    );
    assert_eq!(
        definition_digest([("café", Step)]),
        sha256_hex("[[\"café\",\"step\"]]".as_bytes())
    );
}

#[test]
fn changes_with_the_step_list_only() {
    let base = definition_digest([("a", Step), ("b", Step)]);
    assert_ne!(
        base,
        definition_digest([("b", Step), ("a", Step)]),
        "reorder"
    );
    assert_ne!(
        base,
        definition_digest([("a", Step), ("c", Step)]),
        "rename"
    );
    assert_ne!(base, definition_digest([("a", Step)]), "remove");
    assert_ne!(
        base,
        definition_digest([("a", Step), ("b", Removed)]),
        "gravestone"
    );
    assert_ne!(
        base,
        definition_digest([("a", Step), ("b", FanOut)]),
        "kind"
    );
    assert_eq!(base, definition_digest([("a", Step), ("b", Step)]));
}

#[test]
fn hex_is_lowercase_and_full_length() {
    let digest = sha256_hex(b"anything");
    assert_eq!(digest.len(), DIGEST_HEX_LEN);
    assert!(
        digest
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    );
}
