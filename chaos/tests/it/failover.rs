//! The failover test: a private primary with a synchronous streaming standby,
//! two workers and a client on a two-host URL with
//! `target_session_attrs=read-write`; the primary is stopped (immediate) and
//! the standby promoted mid-run. Every run must finish, no step be lost and no
//! attempt's outcome be recorded twice. The binary sets up and removes both
//! clusters and prints its figures (see RELIABILITY.md).

use crate::common::{assert_figures, run_chaos};

#[test]
fn workers_and_a_client_go_on_after_the_standby_is_promoted() {
    let stdout = run_chaos(
        "pgbus-chaos failover",
        &[
            "failover",
            "--runs",
            "100",
            "--workers",
            "2",
            "--deadline",
            "60",
        ],
    );
    assert_figures(
        &stdout,
        &[
            "replication          synchronous",
            "no step attempt completed twice: 0 attempts",
            "each step of each run completed exactly once: 0 (run, step) pairs",
            "time to resume",
        ],
    );
}
