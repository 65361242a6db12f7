//! What the figures were measured on: the machine, the server, the date and
//! the commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::BoxError;

/// The machine and the code measured.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub(crate) cpu_model: String,
    /// Logical CPUs (`processor` entries).
    pub(crate) cpus: usize,
    /// `MemTotal` from `/proc/meminfo`, GiB.
    pub(crate) ram_gib: f64,
    /// `SELECT version()`.
    pub(crate) postgres: String,
    /// Server settings that bound a commit-heavy load.
    pub(crate) postgres_settings: BTreeMap<String, String>,
    /// When the run began, UTC.
    pub(crate) date: String,
    /// The commit checked out (`HEAD`), read from `.git`; local changes on top
    /// of it are not visible here.
    pub(crate) commit: String,
}

/// Server settings printed beside the version: a step engine's throughput
/// follows commit latency and connection limits.
const SETTINGS: &str = "
SELECT name, current_setting(name) FROM pg_settings
WHERE name IN ('max_connections', 'shared_buffers', 'synchronous_commit', 'fsync',
               'wal_sync_method', 'max_wal_size')
ORDER BY name";

impl Machine {
    /// Reads it all; `admin` is a connection to the measured server.
    pub(crate) async fn read(admin: &tokio_postgres::Client) -> Result<Self, BoxError> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let cpus = cpuinfo
            .lines()
            .filter(|line| {
                line.split(':')
                    .next()
                    .is_some_and(|k| k.trim() == "processor")
            })
            .count();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let ram_kib: f64 = meminfo
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let postgres: String = admin.query_one("SELECT version()", &[]).await?.get(0);
        let postgres_settings = admin
            .query(SETTINGS, &[])
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        Ok(Self {
            cpu_model,
            cpus,
            ram_gib: ram_kib / (1024.0 * 1024.0),
            postgres,
            postgres_settings,
            date: chrono::Utc::now()
                .format("%Y-%m-%d %H:%M:%S UTC")
                .to_string(),
            commit: commit(crate::workspace_root()),
        })
    }
}

/// The commit `HEAD` names, read from the repository's files (no `git` needed):
/// a detached `HEAD` holds it, else the branch it names does, as a loose ref
/// or in `packed-refs`. Worktrees (a `.git` file) are followed to the shared
/// repository for their refs.
fn commit(root: &Path) -> String {
    let Some(git_dir) = git_dir(root) else {
        return "unknown (no .git)".to_owned();
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map_or_else(|_| git_dir.clone(), |dir| git_dir.join(dir.trim()));
    let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD")) else {
        return "unknown (no HEAD)".to_owned();
    };
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref: ") else {
        return head.to_owned();
    };
    for dir in [&git_dir, &common] {
        if let Ok(id) = std::fs::read_to_string(dir.join(reference)) {
            return format!("{} ({reference})", id.trim());
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).unwrap_or_default();
    packed
        .lines()
        .find_map(|line| {
            let (id, name) = line.split_once(' ')?;
            (name == reference).then(|| format!("{id} ({reference})"))
        })
        .unwrap_or_else(|| format!("unknown ({reference} has no commit yet)"))
}

/// `root/.git`, or the directory a `.git` file (`gitdir: ...`) points to.
fn git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let pointer = std::fs::read_to_string(&dot_git).ok()?;
    let dir = PathBuf::from(pointer.trim().strip_prefix("gitdir:")?.trim());
    Some(if dir.is_absolute() {
        dir
    } else {
        root.join(dir)
    })
}
