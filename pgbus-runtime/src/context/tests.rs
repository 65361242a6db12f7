use serde_json::{Value, json};

use super::*;

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!([value]);
    }
    value
}

fn reason(name: &str, payload: &Value) -> Option<String> {
    match check_signal(name, payload) {
        Ok(()) => None,
        Err(crate::Error::InvalidSignal { reason }) => Some(reason),
        Err(other) => panic!("not an InvalidSignal: {other:?}"),
    }
}

#[test]
fn a_payload_is_at_most_a_hundred_levels_deep() {
    assert_eq!(reason("s", &nested(MAX_SIGNAL_PAYLOAD_DEPTH)), None);
    assert_eq!(
        reason("s", &nested(MAX_SIGNAL_PAYLOAD_DEPTH + 1)).as_deref(),
        Some("a signal payload is at most 100 levels of arrays and objects deep")
    );
    let mut object = json!("leaf");
    for _ in 0..=MAX_SIGNAL_PAYLOAD_DEPTH {
        object = json!({ "k": object });
    }
    assert!(
        reason("s", &object).is_some(),
        "objects count as levels too"
    );
    assert_eq!(depth(&json!("scalar")), 0);
    assert_eq!(depth(&json!([1, [2, [3]], {"a": {}}])), 3);
}

#[test]
fn a_payload_is_at_most_256_kib_of_json() {
    // A JSON string of n bytes of text is n + 2 bytes with its quotes.
    let fits = Value::String("x".repeat(MAX_SIGNAL_PAYLOAD_BYTES - 2));
    let over = Value::String("x".repeat(MAX_SIGNAL_PAYLOAD_BYTES - 1));
    assert_eq!(reason("s", &fits), None);
    assert_eq!(
        reason("s", &over).as_deref(),
        Some("a signal payload is at most 256 KiB of JSON")
    );
}

#[test]
fn a_payload_with_a_nul_is_refused_and_a_bad_name_first() {
    assert!(reason("s", &json!({"a": "x\u{0}y"})).is_some());
    assert!(reason("s", &json!({"x\u{0}": 1})).is_some());
    assert!(
        reason("", &nested(MAX_SIGNAL_PAYLOAD_DEPTH + 1))
            .is_some_and(|r| r.starts_with("a signal name"))
    );
}

#[test]
fn the_limits_words_name_the_configured_size() {
    let refusal = |limits: Limits, input: &Value| match limits.check_input(input) {
        Err(crate::Error::InvalidInput { reason }) => reason,
        other => panic!("{other:?}"),
    };
    let tiny = Limits::default().input_bytes(0);
    assert_eq!(tiny.input_bytes, 1, "at least one byte");
    assert_eq!(
        refusal(tiny, &json!("ab")),
        "an input is at most 1 byte of JSON"
    );
    assert!(tiny.check_input(&json!(1)).is_ok());
    let zero = Limits {
        input_bytes: 0,
        ..Limits::default()
    };
    assert_eq!(
        refusal(zero, &json!(1)),
        "an input is at most 0 bytes of JSON"
    );
}
