//! What the chaos tests share: running `pgbus-chaos`, one run at a time, and
//! checking that it passed.

use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Held for each run of `pgbus-chaos`. Each run starts PostgreSQL clusters of
/// its own, worker processes and (half-open) a network namespace, under a
/// deadline; when they were three test binaries, Cargo ran them one after
/// another, and two at once on a small machine would eat into each other's
/// deadlines. A test that fails while holding it does not stop the others.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the `pgbus-chaos` binary with `args`, echoes its stdout and stderr,
/// and returns its stdout.
///
/// # Panics
///
/// If the binary cannot be started, exits unsuccessfully (the message names
/// `what` and the time it took), or does not print
/// `result: all checks passed`.
pub(crate) fn run_chaos(what: &str, args: &[&str]) -> String {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
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
