//! The macro diagnostics, locked: every `ui/fail/*.rs` must fail to compile with
//! exactly the committed `.stderr`, and every `ui/pass/*.rs` must compile and run.
//!
//! After an intended change to a diagnostic, regenerate with
//! `TRYBUILD=overwrite cargo test -p pgbus-ui-tests` and read each changed `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
