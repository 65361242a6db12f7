//! The raw-SQL floor: `shared/bench/raw_sql_baseline.sh` drives pgbench through
//! the fewest round trips one step needs (claim a due row with `FOR UPDATE SKIP
//! LOCKED`, then mark it done and insert the next row in one transaction), at
//! the same number of clients as the worker's concurrency.

use std::path::PathBuf;
use std::process::Command;

use crate::BoxError;
use crate::cpu::{CpuShare, Ticks};

/// The floor at one number of clients.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Baseline {
    pub(crate) steps_per_s: f64,
    /// The CPU while the script ran (its table setup included).
    pub(crate) cpu: CpuShare,
}

/// The script, beside this repository (`../shared/bench/` from its root), as
/// the issue names it. `PGBUS_BENCH_BASELINE` points elsewhere.
pub(crate) fn script() -> PathBuf {
    let script = std::env::var_os("PGBUS_BENCH_BASELINE").map_or_else(
        || crate::workspace_root().join("../shared/bench/raw_sql_baseline.sh"),
        PathBuf::from,
    );
    // Without the `..`, for the table; as given when it does not exist.
    script.canonicalize().unwrap_or(script)
}

/// Runs the script for `secs` seconds at `clients` and returns its steps per
/// second and the CPU it took. It makes, fills and drops its own table
/// (`bsteps` in `public`).
pub(crate) async fn measure(clients: usize, secs: u32, url: &str) -> Result<Baseline, BoxError> {
    let script = script();
    let url = url.to_owned();
    let before = Ticks::read();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&script)
            .arg(clients.to_string())
            .arg(secs.to_string())
            .arg(&url)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))
    })
    .await??;
    let cpu = before.share_until(Ticks::read());
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("raw_sql_steps_per_s="))
        .and_then(|n| n.parse::<f64>().ok())
        .map(|steps_per_s| Baseline { steps_per_s, cpu })
        .ok_or_else(|| {
            format!(
                "the baseline printed no `raw_sql_steps_per_s=` ({}): {}{}",
                output.status,
                stdout.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            )
            .into()
        })
}
