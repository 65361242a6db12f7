//! The end of a chaos run: what must hold, checked against the rows, and the
//! figures. The rows they read are in `rows`.

mod rows;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use pgbus_runtime::Database;

use crate::workflow::STEPS;
use rows::Rows;

/// A worker the supervisor killed.
pub(crate) struct Kill {
    pub(crate) label: String,
    /// Its pgbus worker id (the `worker_id` on the step rows it claimed).
    pub(crate) worker_id: String,
    /// When the SIGKILL was sent.
    pub(crate) at: SystemTime,
    /// The attempts it held in progress then (`None`: the database could not
    /// say, e.g. while it restarted).
    pub(crate) held: Option<i64>,
}

/// When to kill and restart (in completed steps), and what was done.
pub(crate) struct Schedule {
    kill_points: Vec<u64>,
    restart_points: Vec<u64>,
    kills: Vec<Kill>,
    restarts: Vec<Duration>,
}

impl Schedule {
    pub(crate) const fn new(kill_points: Vec<u64>, restart_points: Vec<u64>) -> Self {
        Self {
            kill_points,
            restart_points,
            kills: Vec::new(),
            restarts: Vec::new(),
        }
    }

    /// After how many completed steps the next kill is due.
    pub(crate) fn next_kill(&self) -> Option<u64> {
        self.kill_points.get(self.kills.len()).copied()
    }

    pub(crate) fn killed(&mut self, kill: Kill) {
        self.kills.push(kill);
    }

    /// After how many completed steps the next restart is due.
    pub(crate) fn next_restart(&self) -> Option<u64> {
        self.restart_points.get(self.restarts.len()).copied()
    }

    pub(crate) fn restarted(&mut self, away: Duration) {
        self.restarts.push(away);
    }
}

/// How long it took.
pub(crate) struct Wall {
    /// From the start of the command, cluster set-up included.
    pub(crate) total: Duration,
    /// From the first run started to the last run finished.
    pub(crate) processing: Duration,
}

/// What the workers logged at `warn` and `error`.
pub(crate) struct LogCounts {
    pub(crate) processes: usize,
    pub(crate) unexpected_exits: usize,
    pub(crate) warnings: usize,
    pub(crate) errors: usize,
    /// Lines per message, most frequent first.
    pub(crate) by_message: Vec<(String, usize)>,
}

struct Check {
    name: &'static str,
    passed: bool,
    detail: String,
}

/// The checks and the figures.
pub(crate) struct Report {
    checks: Vec<Check>,
    figures: Vec<(&'static str, String)>,
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    pub(crate) fn print(&self) {
        println!("checks");
        for check in &self.checks {
            println!(
                "  {:<5} {}: {}",
                if check.passed { "ok" } else { "FAIL" },
                check.name,
                check.detail
            );
        }
        println!("figures");
        for (name, value) in &self.figures {
            println!("  {name:<20} {value}");
        }
        if self.passed() {
            println!("result: all checks passed");
        } else {
            println!("result: CHECKS FAILED");
        }
    }
}

/// Reads the rows and checks them.
pub(crate) async fn run(
    db: &Database,
    runs: u32,
    started: &BTreeSet<i64>,
    schedule: &Schedule,
    wall: &Wall,
    logs: &LogCounts,
) -> Result<Report, String> {
    let rows = Rows::read(db).await?;
    let runs = i64::from(runs);
    let mut figures = counts(&rows, runs);
    figures.extend(chaos(&rows, schedule));
    figures.extend(effort(&rows, wall, logs));
    let mut checks = checks(&rows, runs, started);
    checks.push(detected(&rows, schedule));
    checks.push(quiet(logs));
    Ok(Report { checks, figures })
}

/// The failover and half-open modes' checks: the same as the chaos run's (every
/// run finished, none lost, each step completed once, no attempt's outcome
/// recorded twice, no attempt's body run twice), with `figures` of their own
/// after the counts. Steps whose body ran in more than one attempt (a body
/// re-run after its attempt failed or was taken for stalled: at-least-once, not
/// a bug) are a figure, not a check. One check more: the completions the
/// workers were told had committed (`acknowledged`, counted from their log)
/// are all in the database; one lost in a failover would have run again, and
/// this is how asynchronous replication shows.
pub(crate) async fn outage(
    db: &Database,
    runs: u32,
    started: &BTreeSet<i64>,
    acknowledged: usize,
    figures: Vec<(&'static str, String)>,
) -> Result<Report, String> {
    let rows = Rows::read(db).await?;
    let runs = i64::from(runs);
    let acknowledged = i64::try_from(acknowledged).unwrap_or(i64::MAX);
    let mut all = counts(&rows, runs);
    all.push((
        "steps re-run",
        format!(
            "{} (run, step) pairs whose body ran in more than one attempt (at-least-once)",
            rows.steps_rerun
        ),
    ));
    all.push((
        "late completions",
        format!(
            "{} (`late_completion_ignored`: outcomes the fence refused)",
            rows.late
        ),
    ));
    all.extend(figures);
    let mut checks = checks(&rows, runs, started);
    checks.push(Check {
        name: "every acknowledged completion is in the database",
        passed: acknowledged == rows.completed,
        detail: format!(
            "{acknowledged} completions acknowledged to the workers, {} completed attempts stored",
            rows.completed
        ),
    });
    Ok(Report {
        checks,
        figures: all,
    })
}

/// What must hold.
fn checks(rows: &Rows, runs: i64, started: &BTreeSet<i64>) -> Vec<Check> {
    let mut checks = Vec::new();

    checks.push(Check {
        name: "every run finished",
        passed: rows.runs == runs && rows.finished == runs,
        detail: format!(
            "{} of {runs} ({} paused, {} cancelled, {} still going)",
            rows.finished,
            rows.paused,
            rows.cancelled,
            rows.runs - rows.finished - rows.paused - rows.cancelled
        ),
    });
    let stored: BTreeSet<i64> = rows.run_ids.iter().copied().collect();
    checks.push(Check {
        name: "no run lost, none extra",
        passed: started.len() == usize::try_from(runs).unwrap_or(0) && stored == *started,
        detail: format!(
            "{} runs started, {} in the database, {} started but missing, {} not started but present",
            started.len(),
            stored.len(),
            started.difference(&stored).count(),
            stored.difference(started).count()
        ),
    });
    checks.push(Check {
        name: "each step of each run completed exactly once",
        passed: rows.steps_not_once == 0,
        detail: format!(
            "{} (run, step) pairs of {} without exactly one completed attempt",
            rows.steps_not_once,
            rows.runs * i64::try_from(STEPS.len()).unwrap_or(0)
        ),
    });
    checks.push(Check {
        name: "no step attempt completed twice",
        passed: rows.completed_twice == 0,
        detail: format!(
            "{} attempts with more than one `step_completed` event",
            rows.completed_twice
        ),
    });
    checks.push(Check {
        name: "no step attempt's body ran twice",
        passed: rows.ran_twice == 0,
        detail: format!(
            "{} attempts whose side effect was recorded more than once",
            rows.ran_twice
        ),
    });
    checks.push(Check {
        name: "every completed attempt's body ran",
        passed: rows.completed_without_effect == 0,
        detail: format!(
            "{} completed attempts without a side effect",
            rows.completed_without_effect
        ),
    });
    checks.push(Check {
        name: "nothing left open",
        passed: rows.open == 0,
        detail: format!("{} step rows scheduled, in progress or waiting", rows.open),
    });
    checks
}

/// Whether every attempt a killed worker held was ended by the sweep.
/// Every recovery here is one that works (a killed worker's attempts run
/// again, a restarted server answers again), so the workers log it at `warn`
/// and no `error` line is expected: `error` is for work that was lost or that
/// failed for good, which the other checks would catch as well.
fn quiet(logs: &LogCounts) -> Check {
    Check {
        name: "no `error` line for a recovery that worked",
        passed: logs.errors == 0,
        detail: format!(
            "{} error lines, {} warnings in the workers' log",
            logs.errors, logs.warnings
        ),
    }
}

fn detected(rows: &Rows, schedule: &Schedule) -> Check {
    let mut stalls: HashMap<&str, i64> = HashMap::new();
    for (_, worker, _) in &rows.stalls {
        *stalls.entry(worker.as_str()).or_default() += 1;
    }
    let mut held = 0;
    let mut missed = 0;
    let mut unknown = 0;
    for kill in &schedule.kills {
        match kill.held {
            Some(n) => {
                held += n;
                missed += (n - stalls.get(kill.worker_id.as_str()).copied().unwrap_or(0)).max(0);
            }
            None => unknown += 1,
        }
    }
    Check {
        name: "every attempt a killed worker held was detected as stalled",
        passed: missed == 0,
        detail: format!(
            "{held} held at the kills, {missed} not detected{}",
            if unknown > 0 {
                format!(" ({unknown} kills during a restart not counted)")
            } else {
                String::new()
            }
        ),
    }
}

/// Runs, steps, attempts, executions.
fn counts(rows: &Rows, runs: i64) -> Vec<(&'static str, String)> {
    let mut figures = Vec::new();
    figures.push(("runs", format!("{runs}")));
    figures.push(("steps completed", format!("{}", rows.completed)));
    figures.push((
        "step attempts",
        format!(
            "{} ({} reattempted: {} after a stall, {} after the body failed)",
            rows.attempts,
            rows.reattempted,
            rows.reattempted_stalled,
            rows.reattempted - rows.reattempted_stalled
        ),
    ));
    figures.push((
        "body executions",
        format!(
            "{} ({} attempts ran their body)",
            rows.executions, rows.effects
        ),
    ));

    figures
}

/// Kills, restarts, stalls and how long they took to detect.
fn chaos(rows: &Rows, schedule: &Schedule) -> Vec<(&'static str, String)> {
    let mut figures = Vec::new();
    let killed: HashMap<&str, &Kill> = schedule
        .kills
        .iter()
        .map(|k| (k.worker_id.as_str(), k))
        .collect();
    let mut delays = Vec::new();
    let mut of_live = 0;
    let mut by_detection: HashMap<&str, usize> = HashMap::new();
    for (at, worker, detection) in &rows.stalls {
        *by_detection.entry(detection.as_str()).or_default() += 1;
        match killed.get(worker.as_str()) {
            Some(kill) => {
                let killed_at = kill
                    .at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                delays.push(at - killed_at);
            }
            None => of_live += 1,
        }
    }
    delays.sort_by(f64::total_cmp);
    let holding = schedule
        .kills
        .iter()
        .filter(|k| k.held.is_some_and(|n| n > 0))
        .count();
    let held: i64 = schedule.kills.iter().filter_map(|k| k.held).sum();
    figures.push((
        "kills (SIGKILL)",
        format!(
            "{} ({holding} held attempts mid-step, {held} attempts in all)",
            schedule.kills.len(),
        ),
    ));
    let mut away = String::new();
    for (i, down) in schedule.restarts.iter().enumerate() {
        let _ = write!(
            away,
            "{}{:.2} s",
            if i == 0 { "" } else { ", " },
            down.as_secs_f64()
        );
    }
    figures.push((
        "postgres restarts",
        format!(
            "{} (immediate stop, then start; away {})",
            schedule.restarts.len(),
            if away.is_empty() { "-" } else { &away }
        ),
    ));
    let mut detections: Vec<String> = by_detection
        .iter()
        .map(|(d, n)| format!("{d} {n}"))
        .collect();
    detections.sort();
    figures.push((
        "stalls detected",
        format!(
            "{}: {} of killed workers, {} of live workers (after a restart); by detection: {}",
            rows.stalls.len(),
            delays.len(),
            of_live,
            if detections.is_empty() {
                "-".to_owned()
            } else {
                detections.join(", ")
            }
        ),
    ));
    figures.push((
        "detection delay",
        match (delays.last(), delays.get(delays.len() / 2)) {
            (Some(longest), Some(median)) => format!(
                "longest {longest:.2} s, median {median:.2} s (stall_detected time minus the SIGKILL time, over the attempts of killed workers)"
            ),
            _ => "- (no attempt of a killed worker)".to_owned(),
        },
    ));
    figures.push((
        "late completions",
        format!(
            "{} (`late_completion_ignored`: outcomes the fence refused)",
            rows.late
        ),
    ));
    figures
}

/// The workers' processes and logs, and the time it took.
fn effort(rows: &Rows, wall: &Wall, logs: &LogCounts) -> Vec<(&'static str, String)> {
    let mut figures = Vec::new();
    figures.push((
        "worker processes",
        format!(
            "{} started, {} exited on their own",
            logs.processes, logs.unexpected_exits
        ),
    ));
    let mut logged = format!("{} warnings, {} errors", logs.warnings, logs.errors);
    for (message, count) in &logs.by_message {
        let _ = write!(logged, "\n  {:<20} {count:>6}  {message}", "");
    }
    figures.push(("worker log", logged));
    figures.push((
        "wall time",
        format!(
            "{:.1} s ({:.1} s from the first run started to the last finished)",
            wall.total.as_secs_f64(),
            wall.processing.as_secs_f64()
        ),
    ));
    figures.push((
        "steps/s",
        format!(
            "{:.0} (completed steps over that processing time)",
            rows.completed as f64 / wall.processing.as_secs_f64().max(0.001)
        ),
    ));
    figures
}
