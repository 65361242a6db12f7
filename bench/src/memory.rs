//! The benchmark process's memory, from `/proc/self/status`. The process holds
//! the worker and also the client that starts the runs (and their pools), so
//! the figures bound the worker's from above.

/// Resident set sizes at one moment.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Memory {
    /// When it was read (after which phase).
    pub(crate) after: String,
    /// `VmHWM`: the peak resident set since the process started, MiB. It
    /// cannot be reset, so each reading covers every phase before it.
    pub(crate) peak_rss_mib: f64,
    /// `VmRSS`: the resident set now, MiB.
    pub(crate) rss_mib: f64,
}

impl Memory {
    /// Reads both figures now; zero where the kernel does not report them
    /// (not Linux).
    pub(crate) fn read(after: &str) -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Self {
            after: after.to_owned(),
            peak_rss_mib: field_kib(&status, "VmHWM:") / 1024.0,
            rss_mib: field_kib(&status, "VmRSS:") / 1024.0,
        }
    }
}

/// The value of a `Name:   1234 kB` line, in KiB.
fn field_kib(status: &str, name: &str) -> f64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0)
}
