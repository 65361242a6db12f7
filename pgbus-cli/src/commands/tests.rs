use super::text::{hidden, json_visible, visible};

#[test]
fn visible_escapes_what_acts_on_a_terminal_or_hides() {
    for c in [
        '\u{1b}',
        '\r',
        '\n',
        '\u{7f}',
        '\u{9b}',
        '\u{202e}',
        '\u{2066}',
        '\u{200b}',
        '\u{feff}',
        '\u{061c}',
        '\u{2028}',
        '\u{2029}',
        '\u{180e}',
        '\u{034f}',
        '\u{3164}',
        '\u{fe0f}',
        '\u{e0041}',
    ] {
        let shown = visible(&format!("a{c}b"));
        assert!(!shown.contains(c), "{c:?}: {shown}");
        assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)));
    }
    assert_eq!(visible("Zoë — 注文 #7"), "Zoë — 注文 #7");
}

#[test]
fn json_visible_keeps_the_value_and_hides_nothing() {
    let value = serde_json::json!({
        "note": "a\u{9b}31m\u{202e}b\u{200b}c\u{e0041}d",
        "plain": "Zoë",
    });
    let text = json_visible(&serde_json::to_string_pretty(&value).unwrap_or_default());
    assert!(!text.chars().any(|c| !c.is_ascii() && hidden(c)), "{text}");
    let back: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(back, value);
}

#[test]
fn a_definition_change_is_one_line_with_short_digests() {
    use chrono::TimeZone as _;
    let change = pgbus_runtime::timeline::DefinitionChange {
        at: chrono::Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap(),
        step: Some("ship".to_owned()),
        attempt: Some(2),
        old_digest: "0123456789abcdef0123".to_owned(),
        new_digest: "fedcba9876543210fedc".to_owned(),
    };
    let mut text = String::new();
    super::show::changes_text(&mut text, &[]);
    assert_eq!(text, "", "no change, no line");
    super::show::changes_text(&mut text, &[change]);
    assert_eq!(
        text,
        "definition changed at 2026-12-03T12:00:00.000Z: 0123456789ab -> fedcba987654 (claim of ship#2)\n"
    );
}

#[test]
fn a_held_back_step_says_which_key_and_how_long_a_rate_window_has_left() {
    use chrono::TimeZone;
    use pgbus_runtime::view::HeldBack;
    let now = chrono::Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
    let rate = HeldBack::Rate {
        step_id: 3,
        step_name: "charge".into(),
        key: "step:Pay/charge".into(),
        until: now + chrono::TimeDelta::seconds(3),
    };
    let text = super::held_text(&rate, now);
    assert!(text.contains("rate window of `step:Pay/charge`"), "{text}");
    assert!(text.ends_with("(in 3s)"), "{text}");
    // A window already open: no countdown.
    assert!(!super::held_text(&rate, now + chrono::TimeDelta::seconds(4)).contains("(in"));
    let slot = HeldBack::Concurrency {
        step_id: 3,
        step_name: "charge".into(),
        key: "key:Pay:customer-7".into(),
    };
    assert!(super::held_text(&slot, now).contains("concurrency slot of `key:Pay:customer-7`"));
}

/// The sessions a command opens, read back from the server: the primary's
/// carry the statement and lock timeouts and may write; a replica's carry
/// the same timeouts and are read-only, even when the URL asks otherwise.
#[tokio::test]
async fn a_replica_session_is_read_only_with_the_primarys_timeouts() {
    use clap::Parser as _;
    let url = pgbus_testkit::test_database_url();
    let cli = crate::Cli::try_parse_from([
        "pgbus",
        "--database-url",
        &url,
        "--statement-timeout",
        "7s",
        "runs",
    ])
    .unwrap();
    let settings = |db: pgbus_runtime::Database| async move {
        let client = db.pool().get().await.unwrap();
        let mut read = Vec::new();
        for setting in [
            "statement_timeout",
            "lock_timeout",
            "default_transaction_read_only",
        ] {
            let row = client
                .query_one(&format!("SHOW {setting}"), &[])
                .await
                .unwrap();
            read.push(row.get::<_, String>(0));
        }
        read
    };
    let primary = super::connect(&cli).await.unwrap();
    assert_eq!(settings(primary).await, ["7s", "5s", "off"]);
    let replica = super::connect_replica(&cli, &url).await.unwrap();
    assert_eq!(settings(replica).await, ["7s", "5s", "on"]);
    let separator = if url.contains('?') { '&' } else { '?' };
    let asks_to_write = format!("{url}{separator}options=-c%20default_transaction_read_only%3Doff");
    let replica = super::connect_replica(&cli, &asks_to_write).await.unwrap();
    assert_eq!(settings(replica).await, ["7s", "5s", "on"]);
}
