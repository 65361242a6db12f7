//! The macro diagnostics, locked: every `ui/fail/*.rs` must fail to compile with
//! exactly the committed `.stderr`. Every `ui/pass/*.rs` must compile and run:
//! those are test targets of this crate (`Cargo.toml`), built with the
//! workspace, so that trybuild only checks and never builds its dependencies.
//!
//! After an intended change to a diagnostic, regenerate with
//! `TRYBUILD=overwrite cargo test -p pgbus-ui-tests` and read each changed `.stderr`.
//! A case whose message suggests a fix ends with `// fix:` lines that
//! `tests/fixes.rs` applies and checks; the fixed cases in `ui/fixed/` compile
//! as the `fixed` target.

use std::env;
use std::process::Command;

/// Set in the child this test starts (see [`ui`]): the child runs the cases.
const CHILD: &str = "PGBUS_UI_TESTS_CHILD";

/// The flags trybuild 1.0 gives rustc for the cases (its `rustflags.rs`):
/// `--cfg trybuild --verbose -A dead_code --diagnostic-width=140`, in
/// cargo's encoded form (separated by `0x1f`).
const CASE_RUSTFLAGS: &str =
    "--cfg\u{1f}trybuild\u{1f}--verbose\u{1f}-A\u{1f}dead_code\u{1f}--diagnostic-width=140";

/// Runs the compile-fail cases in a child process whose environment carries
/// [`CASE_RUSTFLAGS`] as `CARGO_ENCODED_RUSTFLAGS`.
///
/// Why: trybuild checks the cases' dependencies once with its base flags and
/// then the cases with `--diagnostic-width=140` added, passed as
/// `--config build.rustflags`; the flags are part of every unit's
/// fingerprint, so the whole dependency graph (the runtime with its Postgres
/// and TLS stack) is checked twice. `CARGO_ENCODED_RUSTFLAGS` comes first in
/// cargo's order of rustflag sources, so with it both of trybuild's cargo
/// runs use the same flags and the second reuses the first's work
/// (docs/decisions.md, "Test suite wall time"). A caller who set
/// `CARGO_ENCODED_RUSTFLAGS` or `RUSTFLAGS` (a coverage run) keeps trybuild's
/// own handling: no child, nothing overridden.
#[test]
fn ui() {
    let overridden =
        env::var_os("CARGO_ENCODED_RUSTFLAGS").is_some() || env::var_os("RUSTFLAGS").is_some();
    if env::var_os(CHILD).is_some() || overridden {
        let cases = trybuild::TestCases::new();
        cases.compile_fail("ui/fail/*.rs");
        return;
    }
    let this = env::current_exe().expect("the test binary's own path");
    let status = Command::new(this)
        .args(["ui", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("CARGO_ENCODED_RUSTFLAGS", CASE_RUSTFLAGS)
        .status()
        .expect("the ui cases' child process starts");
    assert!(status.success(), "the ui cases failed: {status}");
}
