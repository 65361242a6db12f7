//! The failover test: a private primary with a synchronous streaming standby,
//! two workers and a client on a two-host URL with
//! `target_session_attrs=read-write`; the primary is stopped (immediate) and
//! the standby promoted mid-run. Every run must finish, no step be lost and no
//! attempt's outcome be recorded twice. The binary sets up and removes both
//! clusters and prints its figures (see RELIABILITY.md).

#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Instant;

#[test]
fn workers_and_a_client_go_on_after_the_standby_is_promoted() {
    let began = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_pgbus-chaos"))
        .args([
            "failover",
            "--runs",
            "100",
            "--workers",
            "2",
            "--deadline",
            "60",
        ])
        .output()
        .expect("run pgbus-chaos failover");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "pgbus-chaos failover failed ({}) after {:?}",
        output.status,
        began.elapsed()
    );
    assert!(stdout.contains("result: all checks passed"), "{stdout}");
    for figure in [
        "replication          synchronous",
        "no step attempt completed twice: 0 attempts",
        "each step of each run completed exactly once: 0 (run, step) pairs",
        "time to resume",
    ] {
        assert!(stdout.contains(figure), "no `{figure}` in:\n{stdout}");
    }
}
