use super::*;

#[test]
fn schema_names_are_plain_identifiers() {
    for good in [
        "pgbus",
        "t_1",
        "_x",
        "a23456789012345678901234567890123456789012345678901234567890123",
    ] {
        assert!(Schema::new(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "1abc",
        "Pgbus",
        "pg-bus",
        "pg bus",
        "a\"b",
        "pgbus;drop",
        "é",
        &"a".repeat(64),
    ] {
        assert!(
            matches!(Schema::new(bad), Err(Error::InvalidSchema(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn every_statement_names_the_schema_quoted() {
    let schema = Schema::new("t_9").unwrap();
    let sql = Statements::new(&schema);
    assert!(sql.claim.contains("\"t_9\".steps"));
    assert!(!sql.claim.contains("{schema}"));
    assert_eq!(schema.channel(), "pgbus_t_9");
}
