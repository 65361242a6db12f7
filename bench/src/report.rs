//! The figures of one run: printed as a table, written as JSON.

use std::fmt;

use crate::BoxError;
use crate::baseline::Baseline;
use crate::cpu::CpuShare;
use crate::history::{self, HistoryPoint};
use crate::latency::Latency;
use crate::machine::Machine;
use crate::macro_cost::MacroCost;
use crate::memory::Memory;
use crate::options::Scale;
use crate::starts::Starts;
use crate::throughput::Throughput;

/// Everything measured, in the order. Phases that did not run (an
/// error stopped the run, or `--no-macro-cost`) are empty.
#[derive(Debug, Clone, serde::Serialize)]
#[allow(clippy::struct_excessive_bools)] // one per `--only-*` switch
pub(crate) struct Report {
    /// How the benchmark was invoked.
    pub(crate) command: String,
    /// The sizes used (`--quick` or the full run).
    pub(crate) scale: Scale,
    pub(crate) machine: Option<Machine>,
    /// 1. Steps per second beside the raw-SQL floor.
    pub(crate) throughput: Vec<ThroughputRow>,
    /// 2. Pickup latency, notifications on, then off.
    pub(crate) latency: Vec<Latency>,
    /// 3. Steps per second as history grows: empty, then each load.
    pub(crate) history: Vec<HistoryPoint>,
    /// 3. And beside runs parked on a signal.
    pub(crate) parked: Option<HistoryPoint>,
    /// 4. This process's memory after the phases that load the worker most.
    pub(crate) memory: Vec<Memory>,
    /// 5. The macro cost.
    pub(crate) macro_cost: Option<MacroCost>,
    /// 6. Starts per second, one by one and in bulk.
    pub(crate) starts: Option<Starts>,
    /// Whether only section 1 ran (`--only-steps`).
    pub(crate) only_steps: bool,
    /// Whether only section 6 ran (`--only-starts`).
    pub(crate) only_starts: bool,
    /// 7. Flow control: steps per second beside keys at their limit.
    pub(crate) flow: Option<crate::flow::FlowFigures>,
    /// Whether only section 7 ran (`--only-flow`).
    pub(crate) only_flow: bool,
    /// 8. The dashboard's pages on a million runs.
    pub(crate) dashboard: Option<crate::dashboard::DashboardFigures>,
    /// Whether only section 8 ran (`--only-dashboard`).
    pub(crate) only_dashboard: bool,
    /// The whole run, seconds.
    pub(crate) wall_s: f64,
    /// What stopped the run early, if anything did.
    pub(crate) error: Option<String>,
}

/// The engine at one concurrency beside the raw-SQL floor at as many clients.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ThroughputRow {
    pub(crate) engine: Throughput,
    /// `raw_sql_steps_per_s`, when the baseline ran.
    pub(crate) raw_sql_steps_per_s: Option<f64>,
    /// The machine's CPU while the baseline ran.
    pub(crate) raw_sql_cpu: Option<CpuShare>,
    /// Engine over baseline.
    pub(crate) ratio: Option<f64>,
    /// Why the baseline has no figure.
    pub(crate) raw_sql_error: Option<String>,
}

impl ThroughputRow {
    /// The row; a baseline that failed leaves its reason instead of a figure
    /// (the engine's figure stands on its own).
    pub(crate) fn new(engine: Throughput, baseline: Result<Baseline, BoxError>) -> Self {
        match baseline {
            Ok(Baseline {
                steps_per_s: raw,
                cpu,
            }) => Self {
                ratio: (raw > 0.0).then(|| engine.steps_per_s / raw),
                raw_sql_steps_per_s: Some(raw),
                raw_sql_cpu: Some(cpu),
                raw_sql_error: None,
                engine,
            },
            Err(error) => Self {
                engine,
                raw_sql_steps_per_s: None,
                raw_sql_cpu: None,
                ratio: None,
                raw_sql_error: Some(error.to_string()),
            },
        }
    }
}

impl Report {
    pub(crate) fn new(args: &[String], scale: Scale, only_starts: bool) -> Self {
        let mut command = "cargo run --release -p pgbus-bench".to_owned();
        if !args.is_empty() {
            command.push_str(" -- ");
            command.push_str(&args.join(" "));
        }
        Self {
            command,
            scale,
            machine: None,
            throughput: Vec::new(),
            latency: Vec::new(),
            history: Vec::new(),
            parked: None,
            memory: Vec::new(),
            macro_cost: None,
            starts: None,
            only_starts,
            flow: None,
            only_flow: false,
            dashboard: None,
            only_dashboard: false,
            only_steps: false,
            wall_s: 0.0,
            error: None,
        }
    }

    /// Fills in what needs figures from two phases: the parked runs' share of
    /// the empty schema's steps per second.
    pub(crate) fn settle(&mut self) {
        if let (Some(parked), Some(empty)) = (self.parked.as_mut(), self.history.first()) {
            parked.pct_of_empty =
                Some(100.0 * parked.throughput.steps_per_s / empty.throughput.steps_per_s);
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(f, "pgbus benchmark (issue 7)")?;
        self.fmt_machine(f)?;
        writeln!(f, "  command    {}", self.command)?;
        if self.only_dashboard {
            self.fmt_dashboard(f)?;
        } else if self.only_steps {
            self.fmt_throughput(f)?;
        } else if !self.only_starts && !self.only_flow {
            self.fmt_throughput(f)?;
            self.fmt_latency(f)?;
            self.fmt_history(f)?;
            self.fmt_memory(f)?;
            self.fmt_macro_cost(f)?;
        }
        if !self.only_flow && !self.only_steps && !self.only_dashboard {
            self.fmt_starts(f)?;
        }
        if !self.only_starts && !self.only_steps && !self.only_dashboard {
            self.fmt_flow(f)?;
        }
        writeln!(f)?;
        writeln!(f, "wall time  {:.0} s", self.wall_s)?;
        if let Some(error) = &self.error {
            writeln!(f, "STOPPED EARLY: {error}")?;
        }
        Ok(())
    }
}

/// Writes each line of `text` indented under its table.
fn note(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    for line in text.lines() {
        writeln!(f, "   {line}")?;
    }
    Ok(())
}

impl Report {
    fn fmt_machine(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(m) = &self.machine else {
            return writeln!(f, "  (no machine details: the server did not answer)");
        };
        writeln!(f, "  date       {}", m.date)?;
        writeln!(f, "  commit     {}", m.commit)?;
        writeln!(
            f,
            "  machine    {} x {} CPUs, {:.1} GiB RAM",
            m.cpu_model, m.cpus, m.ram_gib
        )?;
        writeln!(f, "  postgres   {}", m.postgres)?;
        let settings: Vec<String> = m
            .postgres_settings
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        writeln!(f, "             {}", settings.join(" "))
    }

    fn fmt_throughput(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(
            f,
            "1. Steps per second: runs of 5 no-op steps, all started up front, one worker in this process"
        )?;
        note(
            f,
            "concurrency    runs   engine steps/s   (whole batch)   raw SQL steps/s   engine/raw",
        )?;
        for row in &self.throughput {
            let e = &row.engine;
            let (raw, ratio) = match (row.raw_sql_steps_per_s, row.ratio) {
                (Some(raw), Some(ratio)) => (format!("{raw:.0}"), format!("{ratio:.2}")),
                (Some(raw), None) => (format!("{raw:.0}"), "-".to_owned()),
                _ => ("failed".to_owned(), "-".to_owned()),
            };
            writeln!(
                f,
                "   {:>11} {:>7} {:>16.0} {:>15.0} {:>17} {:>12}",
                e.concurrency, e.runs, e.steps_per_s, e.overall_steps_per_s, raw, ratio
            )?;
        }
        writeln!(f)?;
        note(
            f,
            "where the time goes   machine busy (engine / raw)   worker CPU, % of one   WAL bytes/step",
        )?;
        for row in &self.throughput {
            let e = &row.engine;
            let raw_busy = row
                .raw_sql_cpu
                .map_or_else(|| "-".to_owned(), |c| format!("{:.0}%", c.machine_busy_pct));
            writeln!(
                f,
                "   C = {:<15} {:>12} / {:<12} {:>20.0}% {:>16.0}",
                e.concurrency,
                format!("{:.0}%", e.cpu.machine_busy_pct),
                raw_busy,
                e.cpu.process_pct_of_one_cpu,
                e.wal_bytes_per_step
            )?;
        }
        note(
            f,
            "Machine busy: all CPUs, from /proc/stat, over the whole batch (the raw script's table",
        )?;
        note(
            f,
            "setup included). Worker CPU: this process (worker, and the client that started the runs).",
        )?;
        note(
            f,
            "WAL: pg_current_wal_lsn() across the batch over its steps, the full-page images after",
        )?;
        note(f, "the batch's CHECKPOINT included.")?;
        write_wire(f, &self.throughput)?;
        for row in &self.throughput {
            if let Some(error) = &row.raw_sql_error {
                writeln!(
                    f,
                    "   raw SQL at {} failed: {error}",
                    row.engine.concurrency
                )?;
            }
        }
        note(
            f,
            &format!(
                "engine: the steady middle 80% of step completions (whole batch: first claim to last
outcome). Each batch: a fresh schema, sized by a pilot batch to take ~{:.0} s, on fresh
connections, after a CHECKPOINT. The engine's pool holds 16 connections
(Database::connect_with) whatever the concurrency.
raw SQL: {}
at as many pgbench clients for {} s, right after the engine (also after a CHECKPOINT).",
                self.scale.measure_secs,
                crate::baseline::script().display(),
                self.scale.baseline_secs
            ),
        )
    }

    fn fmt_latency(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(
            f,
            "2. Pickup latency, idle worker: first step started_at - scheduled_at (database clock)"
        )?;
        note(f, "notifications      runs    p50 ms    p99 ms    max ms")?;
        for l in &self.latency {
            let how = if l.notifications {
                "on (LISTEN)".to_owned()
            } else {
                format!("off, poll {} ms", l.poll_interval_ms)
            };
            writeln!(
                f,
                "   {how:<16} {:>6} {:>9.1} {:>9.1} {:>9.1}",
                l.samples, l.p50_ms, l.p99_ms, l.max_ms
            )?;
        }
        note(
            f,
            &format!(
                "A worker of default settings. On: each run started 20 ms after the last one ended.
Off: bounded by the default poll interval ({} ms). Runs started one at a time at random
gaps (mean 50 ms), not waiting for pickup, so starts land anywhere in the poll cycle.",
                crate::latency::DEFAULT_POLL_INTERVAL.as_millis()
            ),
        )
    }

    fn fmt_history(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(
            f,
            "3. Cost as history grows: steps per second at concurrency {}",
            history::CONCURRENCY
        )?;
        note(
            f,
            "schema holds                           rows   steps/s   % of empty   setup s",
        )?;
        for point in self.history.iter().chain(&self.parked) {
            let rows = if point.parked_runs > 0 {
                point.parked_runs
            } else {
                point.finished_step_rows
            };
            let pct = point
                .pct_of_empty
                .map_or_else(|| "-".to_owned(), |pct| format!("{pct:.1}%"));
            writeln!(
                f,
                "   {:<32} {:>10} {:>9.0} {:>12} {:>9.1}",
                point.label, rows, point.throughput.steps_per_s, pct, point.setup_s
            )?;
        }
        note(
            f,
            "Measured as in 1. History: copies of a finished run's rows (runs `finished`, steps
`completed`), one INSERT ... SELECT generate_series per load, then VACUUM (ANALYZE) and
CHECKPOINT; setup s is all of that. Parked: runs of one `wait_for = \"never\"` step, each
claimed once and parked, in an otherwise empty schema; the worker measured beside them
serves both workflows; setup s is starting and parking them.",
        )
    }

    fn fmt_memory(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(f, "4. Worker memory: this process, from /proc/self/status")?;
        note(
            f,
            "after                                            peak RSS (VmHWM)   RSS (VmRSS)",
        )?;
        for m in &self.memory {
            writeln!(
                f,
                "   {:<48} {:>12.1} MiB {:>9.1} MiB",
                m.after, m.peak_rss_mib, m.rss_mib
            )?;
        }
        note(
            f,
            "The process holds the client that starts the runs (and its pool) beside the worker.
VmHWM cannot be reset: each peak covers every phase before it.",
        )
    }

    fn fmt_macro_cost(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        let Some(m) = &self.macro_cost else {
            return writeln!(
                f,
                "5. Macro cost: not measured (--no-macro-cost, or an earlier phase failed)"
            );
        };
        writeln!(
            f,
            "5. Macro cost: compile time of a crate with one {}-step workflow",
            m.steps
        )?;
        let secs = |secs: &[f64]| {
            secs.iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "   with #[workflow] and #[step]   {:>6.2} s  (builds: {} s)",
            m.with_macros.mean_s,
            secs(&m.with_macros.secs)
        )?;
        writeln!(
            f,
            "   plain async methods            {:>6.2} s  (builds: {} s)",
            m.plain.mean_s,
            secs(&m.plain.secs)
        )?;
        writeln!(
            f,
            "   difference                     {:>6.2} s",
            m.difference_s
        )?;
        note(
            f,
            "`cargo build`, dev profile, not incremental (a touched but unchanged file costs an
incremental build ~0.1 s either way), of target/bench/macro-cost/, sharing the workspace's
target dir; each timed build follows a warm-up build and touches only the crate's lib.rs.",
        )
    }

    fn fmt_starts(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        let Some(starts) = &self.starts else {
            return writeln!(
                f,
                "6. Starts per second: not measured (an earlier phase failed)"
            );
        };
        writeln!(
            f,
            "6. Starts per second: runs of one step, started and not run, one client"
        )?;
        note(
            f,
            "how            keys     runs   per call   seconds   starts/s",
        )?;
        for r in &starts.rates {
            writeln!(
                f,
                "   {:<14} {:<5} {:>7} {:>10} {:>9.2} {:>10.0}",
                r.how,
                if r.keyed { "yes" } else { "no" },
                r.runs,
                r.per_call,
                r.secs,
                r.starts_per_s
            )?;
        }
        for (keyed, speedup) in &starts.speedup {
            writeln!(
                f,
                "   start_many / one by one, keys {}: {speedup:.1}x",
                if *keyed { "yes" } else { "no" }
            )?;
        }
        note(
            f,
            "One by one: Client::start_with awaited in turn (a round trip each). Bulk:
Client::start_many in calls of MAX_STARTS_PER_CALL (a transaction of two statements at most
each). Each of the four in a fresh schema, after one warm-up start; no worker runs. Keys:
each run its own idempotency key (`start-<n>`), none taken before.",
        )
    }

    fn fmt_dashboard(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::dashboard::BUDGET_MS;
        writeln!(f)?;
        writeln!(f, "8. Dashboard pages (issue 23): each page's answer, ms")?;
        let Some(d) = &self.dashboard else {
            return note(f, "not measured");
        };
        let s = &d.shape;
        let by_status: Vec<String> = s
            .runs_by_status
            .iter()
            .map(|(status, n)| format!("{n} {status}"))
            .collect();
        note(
            f,
            &format!(
                "data: {} runs ({}), {} fan-out children in {} batches ({} open), {} keyed;",
                s.runs,
                by_status.join(", "),
                s.child_runs,
                s.batches,
                s.open_batches,
                s.keyed_runs
            ),
        )?;
        note(
            f,
            &format!(
                "      {} step rows ({} failed, {} waiting; at most {} in a run), {} events, {} signals",
                s.steps, s.failed_steps, s.waiting_steps, s.most_attempts, s.events, s.signals
            ),
        )?;
        let sizes: Vec<String> = s
            .mib
            .iter()
            .map(|(table, mib)| format!("{table} {mib:.0} MiB"))
            .collect();
        let load: f64 = s.load_s.iter().map(|(_, secs)| secs).sum();
        note(
            f,
            &format!("      {}; loaded in {load:.0} s", sizes.join(", ")),
        )?;
        note(
            f,
            &format!(
                "served by {}; {} timed requests a page after one untimed",
                d.binary, d.rounds
            ),
        )?;
        writeln!(f)?;
        note(
            f,
            &format!(
                "{:<38} {:>8} {:>8} {:>8} {:>9}  under {BUDGET_MS:.0} ms",
                "page", "p50", "p95", "max", "bytes"
            ),
        )?;
        for page in &d.pages {
            let verdict = match page.under_budget {
                Some(true) => "yes".to_owned(),
                Some(false) => "NO".to_owned(),
                None => page.outcome.clone(),
            };
            if page.samples == 0 {
                writeln!(
                    f,
                    "   {:<38} {:>8} {:>8} {:>8} {:>9}  {verdict}",
                    page.name, "-", "-", "-", "-"
                )?;
            } else {
                writeln!(
                    f,
                    "   {:<38} {:>8.1} {:>8.1} {:>8.1} {:>9}  {verdict}",
                    page.name, page.p50_ms, page.p95_ms, page.max_ms, page.bytes
                )?;
            }
        }
        note(
            f,
            "Each request on a fresh loopback connection, from connecting to the answer's last byte;",
        )?;
        note(
            f,
            "every page requested once per round, in turn. Under the budget: every timed answer was.",
        )
    }

    fn fmt_flow(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        let Some(flow) = &self.flow else {
            return writeln!(f, "7. Flow control: not measured (an earlier phase failed)");
        };
        writeln!(
            f,
            "7. Flow control: steps per second at concurrency {} beside {} keys at their limit",
            flow.empty.concurrency, flow.keys
        )?;
        writeln!(
            f,
            "   empty schema                 {:>9.0} steps/s",
            flow.empty.steps_per_s
        )?;
        writeln!(
            f,
            "   beside {:>6} keys held      {:>9.0} steps/s   {:.1}% of empty",
            flow.keys, flow.beside.steps_per_s, flow.pct_of_empty
        )?;
        writeln!(
            f,
            "   holding back {} due rows at the head of the queue: {:.2} s, {:.0} rows/s",
            flow.keys, flow.hold_s, flow.held_per_s
        )?;
        note(
            f,
            "Each key: one run of `key_concurrency = 1, slot = \"run\"` parked on a signal that
never comes (it holds the slot), and a second run whose first row is due at priority -1, ahead
of the measured rows, and held back by the claim (out of the due index). The measured workflow
has no limit. Holding back: from the second runs' start until all are held, by a worker of
concurrency 16 that has the workflow.",
        )
    }
}

/// The wire counts per step of each concurrency (`throughput::WirePerStep`).
fn write_wire(f: &mut std::fmt::Formatter<'_>, rows: &[ThroughputRow]) -> std::fmt::Result {
    writeln!(f)?;
    note(
        f,
        "on the wire, per step   round trips   statements   commits   server ms   worker ms   (steps counted)",
    )?;
    for row in rows {
        let e = &row.engine;
        match e.wire {
            Some(w) => writeln!(
                f,
                "   C = {:<15} {:>11.2} {:>12.2} {:>9.2} {:>11.3} {:>11.3}   ({})",
                e.concurrency,
                w.round_trips,
                w.statements,
                w.commits,
                w.server_ms,
                w.worker_ms,
                w.steps
            )?,
            None => writeln!(
                f,
                "   C = {:<15} not counted (the server is not on TCP)",
                e.concurrency
            )?,
        }
    }
    note(
        f,
        "Counted by a proxy between a worker's pool and the server in a batch of its own (pilot-sized,",
    )?;
    note(
        f,
        "untimed): a round trip is the client speaking after the server; statements are CommandCompletes",
    )?;
    note(
        f,
        "(BEGIN and COMMIT included); commits are transactions that committed. Heartbeats, LISTEN and",
    )?;
    note(
        f,
        "sweeps are in; connection start-up is not. The raw-SQL floor's script takes 5 round trips,",
    )?;
    note(
        f,
        "5 statements and 2 commits a step (pgbench sends each statement alone). Server ms: time in",
    )?;
    note(
        f,
        "which some connection waited on an answer; worker ms: the rest of the batch's span, when none",
    )?;
    note(
        f,
        "did (the worker's own time and the proxy's hop). At C = 1 the two add up to a step's latency.",
    )?;
    Ok(())
}
