//! The short chaos run that CI does: a few hundred runs, three workers, three of
//! them killed with SIGKILL and the private PostgreSQL cluster restarted once.
//! The binary sets up and removes its own cluster, so this never touches the
//! server the other tests share.

use crate::common::{assert_figures, run_chaos};

#[test]
fn a_short_chaos_run_finishes_every_run_and_runs_no_attempt_twice() {
    let stdout = run_chaos(
        "pgbus-chaos",
        &[
            "--runs",
            "200",
            "--workers",
            "3",
            "--kills",
            "3",
            "--restarts",
            "1",
            "--deadline",
            "120",
            "--seed",
            "5",
        ],
    );
    assert_figures(
        &stdout,
        &["kills (SIGKILL)      3", "postgres restarts    1"],
    );
}
