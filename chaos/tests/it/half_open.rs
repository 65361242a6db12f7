//! The half-open test: mid-run, every connection of two workers (pool,
//! `LISTEN`, heartbeat and sweep) stops carrying packets, dropped by an `nft`
//! rule inside a network namespace of the binary's own. With keepalives of 1 s
//! and `tcp_user_timeout` of 2 s on the URL, the client side of each must be
//! gone within the 3 s bound plus a 2 s margin, the workers reconnect through
//! the URL's second host, and every run finishes with no attempt's outcome
//! recorded twice (see RELIABILITY.md).
//!
//! Needs root and `ip` and `nft` (Debian's `iproute2` and `nftables`, which
//! `.ci/deps` installs); as another user it says so and does nothing.

use crate::common::{assert_figures, run_chaos};

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

#[test]
fn a_worker_whose_connections_go_half_open_notices_within_the_keepalive_bound() {
    if !root() {
        eprintln!("SKIPPED: the half-open test needs root (a network namespace and nft rules)");
        return;
    }
    let stdout = run_chaos(
        "pgbus-chaos half-open",
        &[
            "half-open",
            "--runs",
            "100",
            "--workers",
            "2",
            "--deadline",
            "60",
        ],
    );
    assert!(!stdout.contains("outlived the keepalive bound"), "{stdout}");
    for missing in ["LISTEN back          -", "time to resume       -"] {
        assert!(!stdout.contains(missing), "`{missing}` in:\n{stdout}");
    }
    assert_figures(
        &stdout,
        &[
            "no step attempt completed twice: 0 attempts",
            "each step of each run completed exactly once: 0 (run, step) pairs",
            "LISTEN back",
        ],
    );
}
