use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};

use super::*;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

fn refused_option(options: &StartOptions) -> &'static str {
    match options.check(now()) {
        Err(Error::InvalidStartOption { option, .. }) => option,
        other => panic!("{other:?}"),
    }
}

#[test]
fn at_and_delay_set_one_time_and_the_last_wins() {
    let at = now() + chrono::Duration::hours(1);
    let delay = Duration::from_secs(5);
    assert_eq!(
        StartOptions::new().at(at).delay(delay).start_at(),
        Some(StartAt::After(delay))
    );
    assert_eq!(
        StartOptions::new().delay(delay).at(at).start_at(),
        Some(StartAt::At(at))
    );
    assert_eq!(StartOptions::new().start_at(), None);
}

#[test]
fn the_options_read_back() {
    let options = StartOptions::new().key("k").queue("bulk").priority(-3);
    assert_eq!(options.idempotency_key(), Some("k"));
    assert_eq!(options.run_queue(), Some("bulk"));
    assert_eq!(options.run_priority(), Some(-3));
    assert_eq!(StartOptions::new(), StartOptions::default());
}

#[test]
fn a_time_a_century_ahead_is_the_last_accepted() {
    let limit = now() + chrono::Duration::days(36_500);
    assert!(StartOptions::new().at(limit).check(now()).is_ok());
    assert!(
        StartOptions::new()
            .at(now() - chrono::Duration::days(400_000))
            .check(now())
            .is_ok(),
        "a past time is due at once, however far back"
    );
    assert_eq!(
        refused_option(&StartOptions::new().at(limit + chrono::Duration::milliseconds(1))),
        "at"
    );
    assert_eq!(
        refused_option(&StartOptions::new().at(DateTime::<Utc>::MAX_UTC)),
        "at"
    );
}

#[test]
fn a_delay_is_a_duration_of_at_most_36500_days() {
    let max = Duration::from_millis(MAX_DURATION_MS);
    assert!(StartOptions::new().delay(max).check(now()).is_ok());
    assert!(
        StartOptions::new()
            .delay(Duration::ZERO)
            .check(now())
            .is_ok()
    );
    assert_eq!(
        refused_option(&StartOptions::new().delay(max + Duration::from_millis(1))),
        "delay"
    );
    assert_eq!(
        refused_option(&StartOptions::new().delay(Duration::MAX)),
        "delay"
    );
    let message = StartOptions::new()
        .delay(Duration::MAX)
        .check(now())
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("start option `delay` must be at most 36500 days"),
        "{message}"
    );
}

#[test]
fn a_queue_is_a_visible_word_of_at_most_255_characters() {
    for good in [
        "orders",
        "orders_eu",
        "q.1",
        &"q".repeat(MAX_QUEUE_NAME_CHARS),
        "коммерция",
    ] {
        assert!(
            StartOptions::new().queue(good).check(now()).is_ok(),
            "{good}"
        );
    }
    for bad in [
        "",
        " ",
        "two words",
        "tab\there",
        "orders\n",
        "zero\u{200b}width",
        &"q".repeat(MAX_QUEUE_NAME_CHARS + 1),
    ] {
        assert_eq!(
            refused_option(&StartOptions::new().queue(bad)),
            "queue",
            "{bad:?}"
        );
    }
}

#[test]
fn a_bad_key_keeps_its_own_errors_and_is_checked_first() {
    let blank = StartOptions::new().key("  ").queue("");
    assert!(matches!(
        blank.check(now()),
        Err(Error::BlankIdempotencyKey)
    ));
    let long = StartOptions::new().key("k".repeat(256));
    assert!(matches!(
        long.check(now()),
        Err(Error::InvalidIdempotencyKey)
    ));
}

#[test]
fn json_bytes_counts_the_compact_form() {
    let value = serde_json::json!({"a": [1, 2, "x y"]});
    assert_eq!(
        json_bytes(&value),
        serde_json::to_vec(&value).unwrap().len()
    );
    assert_eq!(json_bytes(&serde_json::json!(null)), 4);
}
