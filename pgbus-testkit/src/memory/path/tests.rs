use serde_json::json;

use super::Path;

fn matches(path: &str, input: &serde_json::Value) -> bool {
    Path::parse(path).expect("a path").matches(input)
}

#[test]
fn members_elements_and_filters_match_as_postgres_does() {
    let input =
        json!({"customer": "c42", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 5}]});
    assert!(matches("$.customer", &input));
    assert!(!matches("$.missing", &input));
    assert!(matches(r#"$.customer ? (@ == "c42")"#, &input));
    assert!(!matches(r#"$.customer ? (@ == "c41")"#, &input));
    assert!(matches("$.lines[*] ? (@.qty > 4)", &input));
    assert!(!matches("$.lines[*] ? (@.qty > 5)", &input));
    assert!(
        matches("$.lines.sku ? (@ == \"b\")", &input),
        "lax: members of each element"
    );
    assert!(matches("$.lines[1].qty ? (@ >= 5)", &input));
    assert!(matches("$ ? (exists(@.lines))", &input));
    assert!(
        !matches("$.customer ? (@ > 3)", &input),
        "a string is not above a number"
    );
}

#[test]
fn what_it_does_not_read_is_a_typed_error() {
    for bad in [
        "customer",
        "$.",
        "$.a ? (@ ~ 1)",
        "$[x]",
        "$.a ? (@ == [1])",
    ] {
        assert!(
            matches!(
                Path::parse(bad),
                Err(pgbus_runtime::Error::InvalidInputPath { .. })
            ),
            "{bad}"
        );
    }
}
