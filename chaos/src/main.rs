//! The chaos test of pgbus: several worker processes run a few thousand
//! multi-step runs on a private, throwaway PostgreSQL cluster while the
//! supervisor kills workers with SIGKILL at random and restarts PostgreSQL (an
//! immediate stop, so the server recovers from a crash). Then it checks that
//! every run finished, that no step attempt completed twice or ran its body twice,
//! and that no run was lost, and prints its figures.
//!
//! ```sh
//! cargo run --release -p pgbus-chaos                    # the full run
//! cargo run --release -p pgbus-chaos -- --runs 200 --workers 3 --kills 3 --restarts 1
//! ```
//!
//! One executable, several modes: the supervisor (the default) starts copies of
//! itself in `worker` mode; `failover` stops a primary and promotes its
//! standby under load; `half-open` drops the packets of a worker's
//! connections under load. See `RELIABILITY.md` at the repository root.
//!
//! ```sh
//! cargo run -p pgbus-chaos -- failover                  # 100 runs, synchronous standby
//! cargo run -p pgbus-chaos -- half-open                 # as root: connections dropped mid-run
//! ```

mod capture;
mod check;
mod cluster;
mod failover;
mod half_open;
mod options;
mod outage;
mod supervisor;
mod worker;
mod workflow;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("worker") => options::WorkerOptions::parse(&args[1..]).and_then(worker::main),
        Some("failover") => match options::OutageOptions::parse(&args[1..]) {
            Ok(None) => {
                println!("{}", options::OUTAGE_USAGE);
                return ExitCode::SUCCESS;
            }
            Ok(Some(options)) => failover::main(&options),
            Err(error) => Err(error),
        },
        Some("half-open") => match options::OutageOptions::parse(&args[1..]) {
            Ok(None) => {
                println!("{}", options::OUTAGE_USAGE);
                return ExitCode::SUCCESS;
            }
            Ok(Some(options)) => half_open::main(&options, &args[1..]),
            Err(error) => Err(error),
        },
        _ => match options::Options::parse(&args) {
            Ok(None) => {
                println!("{}", options::USAGE);
                return ExitCode::SUCCESS;
            }
            Ok(Some(options)) => supervisor::main(&options),
            Err(error) => Err(error),
        },
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("pgbus-chaos: {error}");
            ExitCode::from(2)
        }
    }
}
