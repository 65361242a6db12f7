//! The macro diagnostics, locked: every `ui/fail/*.rs` must fail to compile with
//! exactly the committed `.stderr`. Every `ui/pass/*.rs` must compile and run:
//! those are test targets of this crate (`Cargo.toml`), built with the
//! workspace, so that trybuild only checks and never builds its dependencies.
//!
//! After an intended change to a diagnostic, regenerate with
//! `TRYBUILD=overwrite cargo test -p pgbus-ui-tests` and read each changed `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
}
