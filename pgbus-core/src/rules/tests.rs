use super::*;

#[test]
fn durations_over_zero_pass_and_zero_is_refused_with_the_fix() {
    assert_eq!(check_timeout_ms(1), Ok(1));
    assert_eq!(check_timeout_ms(0), Err(TIMEOUT_ZERO));
    assert_eq!(check_wait_timeout_ms(60_000), Ok(60_000));
    assert_eq!(check_wait_timeout_ms(0), Err(WAIT_TIMEOUT_ZERO));
    assert_eq!(check_deadline_ms(3_600_000), Ok(3_600_000));
    assert_eq!(check_deadline_ms(0), Err(DEADLINE_ZERO));
    assert!(TIMEOUT_ZERO.contains("leave it out"));
}

#[test]
fn a_wait_timeout_needs_a_signal_to_wait_for() {
    assert_eq!(check_wait_timeout_place(true), Ok(()));
    assert_eq!(
        check_wait_timeout_place(false),
        Err(WAIT_TIMEOUT_NEEDS_WAIT_FOR)
    );
}

#[test]
fn queues_are_not_empty_and_hold_no_whitespace() {
    assert_eq!(check_queue("orders-staging"), Ok(()));
    assert!(check_queue("").unwrap_err().contains("cannot be empty"));
    for bad in ["a b", "a\tb", "a\u{0}b", " a"] {
        assert!(
            check_queue(bad).unwrap_err().contains("whitespace"),
            "{bad:?}"
        );
    }
}

#[test]
fn priorities_fit_i16() {
    assert_eq!(check_priority(i128::from(i16::MIN)), Ok(i16::MIN));
    assert_eq!(check_priority(i128::from(i16::MAX)), Ok(i16::MAX));
    let error = check_priority(32_768).unwrap_err();
    assert!(error.contains("-32768 to 32767"), "{error}");
}

#[test]
fn concurrency_limits_are_one_to_the_maximum() {
    assert_eq!(check_concurrency("concurrency", 1), Ok(1));
    assert_eq!(
        check_concurrency("key_concurrency", i128::from(MAX_CONCURRENCY)),
        Ok(MAX_CONCURRENCY)
    );
    assert!(
        check_concurrency("concurrency", 0)
            .unwrap_err()
            .contains("never run a step")
    );
    assert!(
        check_concurrency("key_concurrency", -1)
            .unwrap_err()
            .starts_with("`key_concurrency` cannot be negative")
    );
    let error = check_concurrency("concurrency", i128::from(MAX_CONCURRENCY) + 1).unwrap_err();
    assert!(error.contains("100001 given"), "{error}");
}
