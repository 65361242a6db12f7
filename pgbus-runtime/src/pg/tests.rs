use super::*;

#[test]
fn schema_names_are_plain_identifiers() {
    for good in ["pgbus", "t_1", "_x", &"a".repeat(MAX_SCHEMA_NAME_LEN)] {
        assert!(Schema::new(good).is_ok(), "{good}");
        // Every identifier derived from it fits Postgres's 63 bytes.
        assert!(Schema::new(good).unwrap().channel().len() <= 63, "{good}");
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
        "pg_bus",
        &"a".repeat(MAX_SCHEMA_NAME_LEN + 1),
        &"a".repeat(63),
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
