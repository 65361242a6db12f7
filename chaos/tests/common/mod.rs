//! What the chaos crate's test binaries share: running `pgbus-chaos` and
//! checking that it passed.

#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Instant;

/// Runs the `pgbus-chaos` binary with `args`, echoes its stdout and stderr,
/// and returns its stdout.
///
/// # Panics
///
/// If the binary cannot be started, exits unsuccessfully (the message names
/// `what` and the time it took), or does not print
/// `result: all checks passed`.
pub(crate) fn run_chaos(what: &str, args: &[&str]) -> String {
    let began = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_pgbus-chaos"))
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("run {what}: {error:?}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "{what} failed ({}) after {:?}",
        output.status,
        began.elapsed()
    );
    assert!(stdout.contains("result: all checks passed"), "{stdout}");
    stdout
}

/// Asserts that `stdout` contains every one of `figures`.
///
/// # Panics
///
/// On the first figure missing, showing `stdout`.
pub(crate) fn assert_figures(stdout: &str, figures: &[&str]) {
    for figure in figures {
        assert!(stdout.contains(figure), "no `{figure}` in:\n{stdout}");
    }
}
