//! The short chaos run that CI does: a few hundred runs, three workers, three of
//! them killed with SIGKILL and the private PostgreSQL cluster restarted once.
//! The binary sets up and removes its own cluster, so this never touches the
//! server the other tests share.

#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Instant;

#[test]
fn a_short_chaos_run_finishes_every_run_and_runs_no_attempt_twice() {
    let began = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_pgbus-chaos"))
        .args(["--runs", "200", "--workers", "3", "--kills", "3"])
        .args(["--restarts", "1", "--deadline", "120", "--seed", "5"])
        .output()
        .expect("run pgbus-chaos");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "pgbus-chaos failed ({}) after {:?}",
        output.status,
        began.elapsed()
    );
    assert!(stdout.contains("result: all checks passed"), "{stdout}");
    for figure in ["kills (SIGKILL)      3", "postgres restarts    1"] {
        assert!(stdout.contains(figure), "no `{figure}` in:\n{stdout}");
    }
}
