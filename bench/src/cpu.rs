//! Where the CPU went while a batch ran: the whole machine's busy share, from
//! `/proc/stat`, and this process's, from `/proc/self/stat`. Both count in the
//! kernel's clock ticks, so the shares need no tick rate. Zero off Linux.

/// Tick counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ticks {
    /// Every CPU's ticks, all states.
    total: u64,
    /// Every CPU's idle and iowait ticks.
    idle: u64,
    /// This process's user and system ticks.
    process: u64,
    /// CPUs counted in `total`.
    cpus: u64,
}

/// The CPU shares between two readings.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct CpuShare {
    /// The machine's busy time as a share of all its CPUs' time, percent.
    pub(crate) machine_busy_pct: f64,
    /// This process's CPU time as a share of one CPU, percent (up to 100
    /// times the CPU count).
    pub(crate) process_pct_of_one_cpu: f64,
}

impl Ticks {
    /// Reads the counters now.
    pub(crate) fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let mut ticks = Self::default();
        for line in stat.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("cpu") => {
                    let values: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
                    ticks.total = values.iter().sum();
                    ticks.idle =
                        values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
                }
                Some(name) if name.starts_with("cpu") => ticks.cpus += 1,
                _ => {}
            }
        }
        let own = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name (which may hold spaces), from field 3:
        // utime and stime are fields 14 and 15.
        if let Some((_, rest)) = own.rsplit_once(')') {
            let fields: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            ticks.process = fields.iter().sum();
        }
        ticks
    }

    /// The shares from `self` to `later`.
    pub(crate) fn share_until(self, later: Self) -> CpuShare {
        let total = later.total.saturating_sub(self.total);
        if total == 0 || later.cpus == 0 {
            return CpuShare::default();
        }
        let idle = later.idle.saturating_sub(self.idle);
        let process = later.process.saturating_sub(self.process);
        #[allow(clippy::cast_precision_loss)] // tick counts far below 2^52
        CpuShare {
            machine_busy_pct: 100.0 * (total - idle.min(total)) as f64 / total as f64,
            process_pct_of_one_cpu: 100.0 * process as f64 * later.cpus as f64 / total as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_come_from_tick_differences() {
        let before = Ticks {
            total: 1_000,
            idle: 400,
            process: 50,
            cpus: 2,
        };
        let after = Ticks {
            total: 1_200,
            idle: 420,
            process: 90,
            cpus: 2,
        };
        let share = before.share_until(after);
        // 200 ticks over 2 CPUs: 180 busy; the process took 40 of each CPU's 100.
        assert!((share.machine_busy_pct - 90.0).abs() < 1e-9);
        assert!((share.process_pct_of_one_cpu - 40.0).abs() < 1e-9);
        assert!(before.share_until(before).machine_busy_pct.abs() < 1e-9);
    }

    #[test]
    fn this_machine_reports_ticks() {
        let now = Ticks::read();
        if cfg!(target_os = "linux") {
            assert!(now.total > 0 && now.cpus > 0, "{now:?}");
        }
    }
}
