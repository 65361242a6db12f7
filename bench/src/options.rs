//! Command-line options, and how big each measurement is.

/// What `--help` prints.
pub(crate) const USAGE: &str = "\
pgbus-bench: steps per second beside the raw-SQL floor, pickup latency, cost as
history grows, worker memory, macro compile cost and starts per second (one by
one and in bulk), in one run

usage: cargo run --release -p pgbus-bench [-- options]

  --quick           a short smoke run: every measurement, scaled down
                    (its figures are not for comparison)
  --no-macro-cost   leave out the macro compile cost (a generated crate
                    built with cargo three times in each of two variants)
  --only-steps      only steps per second beside the raw-SQL floor (section
                    1), with the wire counts; its JSON goes to
                    target/bench/steps.json
  --only-starts     only starts per second (section 6), one by one and with
                    start_many; its JSON goes to target/bench/starts.json
  --no-group-commit each outcome in a transaction of its own
                    (DatabaseBuilder::group_commit(false); on by default)
  --only-flow       only flow control (section 7): steps per second beside
                    10,000 keys at their limit; its JSON goes to
                    target/bench/flow.json
  --only-dashboard  only the dashboard's pages (section 8): loads 1,000,000
                    runs (20,000 with --quick) into a schema, serves it with
                    target/release/pgbus (build it first: cargo build
                    --release -p pgbus-cli) and times each page; its JSON
                    goes to target/bench/dashboard.json

Environment:
  PGBUS_BENCH_DATABASE_URL   where to measure (default postgres://127.0.0.1:5432/test);
                             every schema the run makes (bench_<uuid>) is dropped
  PGBUS_BENCH_BASELINE       the raw-SQL baseline script
                             (default ../shared/bench/raw_sql_baseline.sh from the repository)
  RUST_LOG                   the engine's log filter (default warn)

It prints a table and writes the same figures as JSON to target/bench/latest.json.";

/// The database URL when `PGBUS_BENCH_DATABASE_URL` is not set: the `test`
/// database the workspace's tests use.
pub(crate) const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:5432/test";

/// The parsed command line.
#[derive(Debug, Clone)]
#[allow(clippy::struct_excessive_bools)] // one per command-line switch
pub(crate) struct Options {
    pub(crate) quick: bool,
    pub(crate) macro_cost: bool,
    /// Only the steps-per-second section.
    pub(crate) only_steps: bool,
    /// Only the starts-per-second section.
    pub(crate) only_starts: bool,
    /// Only the flow control section.
    pub(crate) only_flow: bool,
    /// Only the dashboard pages section.
    pub(crate) only_dashboard: bool,
    /// The engine with group commit (its default; off with
    /// `--no-group-commit`).
    pub(crate) group_commit: bool,
    pub(crate) url: String,
}

impl Options {
    /// The options, or `None` for `--help`.
    pub(crate) fn parse(args: &[String]) -> Result<Option<Self>, String> {
        let mut options = Self {
            quick: false,
            macro_cost: true,
            only_steps: false,
            only_starts: false,
            only_flow: false,
            only_dashboard: false,
            group_commit: true,
            url: std::env::var("PGBUS_BENCH_DATABASE_URL")
                .unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned()),
        };
        for arg in args {
            match arg.as_str() {
                "--help" | "-h" => return Ok(None),
                "--quick" => options.quick = true,
                "--no-macro-cost" => options.macro_cost = false,
                "--only-steps" => options.only_steps = true,
                "--only-starts" => options.only_starts = true,
                "--only-flow" => options.only_flow = true,
                "--only-dashboard" => options.only_dashboard = true,
                "--no-group-commit" => options.group_commit = false,
                other => return Err(format!("unknown option `{other}`; see --help")),
            }
        }
        Ok(Some(options))
    }

    /// How big each measurement is.
    pub(crate) const fn scale(&self) -> Scale {
        if self.quick {
            Scale::QUICK
        } else {
            Scale::FULL
        }
    }
}

/// The size of each measurement. The full one fits the whole run in about five
/// minutes on a 2-core machine; the quick one checks that everything works.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Scale {
    /// The worker concurrencies measured for steps per second.
    pub(crate) concurrencies: [usize; 4],
    /// How long each steps-per-second measurement should take: its run count is
    /// sized from a pilot batch to last about this long.
    pub(crate) measure_secs: f64,
    /// How long the raw-SQL baseline runs pgbench at each concurrency.
    pub(crate) baseline_secs: u32,
    /// Runs started one at a time per pickup-latency figure.
    pub(crate) latency_samples: usize,
    /// Finished step rows in history at each history measurement after the
    /// empty one.
    pub(crate) history_rows: [u64; 2],
    /// Runs parked waiting on a signal that never comes.
    pub(crate) waiting_runs: u32,
    /// Runs started each way for starts per second (one by one, in bulk).
    pub(crate) start_runs: usize,
    /// Runs in the dashboard pages' schema (about five step rows each).
    pub(crate) dashboard_runs: u64,
    /// Timed requests of each dashboard page, after one untimed.
    pub(crate) dashboard_rounds: usize,
}

impl Scale {
    const FULL: Self = Self {
        concurrencies: [1, 4, 16, 64],
        measure_secs: 9.0,
        baseline_secs: 8,
        latency_samples: 200,
        history_rows: [1_000_000, 5_000_000],
        waiting_runs: 10_000,
        start_runs: 10_000,
        dashboard_runs: 1_000_000,
        dashboard_rounds: 12,
    };

    const QUICK: Self = Self {
        concurrencies: [1, 4, 16, 64],
        measure_secs: 1.5,
        baseline_secs: 2,
        latency_samples: 25,
        history_rows: [20_000, 100_000],
        waiting_runs: 500,
        start_runs: 1_000,
        dashboard_runs: 20_000,
        dashboard_rounds: 3,
    };
}
