//! A private, throwaway PostgreSQL cluster: `initdb` into a temporary directory,
//! a free port on 127.0.0.1, trust authentication, `fsync` off (the test crashes
//! the server process, never the machine, so the page cache keeps every write).
//! Run as the `postgres` user when this process is root, since the server
//! refuses to run as root. Stopped and removed when dropped.
//!
//! The failover test adds a streaming standby of such a cluster
//! ([`Cluster::create_standby`], a `pg_basebackup -R` copy on a port of its own)
//! and promotes it ([`Cluster::promote`]).

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The cluster's superuser, created by `initdb -U`.
const SUPERUSER: &str = "postgres";

pub(crate) struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    keep: bool,
    /// Extra `-c name=value` server settings, on every start.
    settings: Vec<String>,
}

impl Cluster {
    /// Creates the cluster (not started yet).
    pub(crate) fn create(bin: Option<&Path>, keep: bool) -> Result<Self, String> {
        let bin = match bin {
            Some(bin) => bin.to_owned(),
            None => find_bin()?,
        };
        for tool in ["initdb", "pg_ctl", "postgres"] {
            if !bin.join(tool).is_file() {
                return Err(format!(
                    "no `{tool}` in {}; pass the PostgreSQL server binaries with --pg-bin DIR",
                    bin.display()
                ));
            }
        }
        let cluster = Self::empty(bin, keep)?;
        let data = cluster.data();
        cluster.output(
            Command::new(cluster.bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync"]),
        )?;
        Ok(cluster)
    }

    /// A cluster with its directory made and nothing in it yet.
    fn empty(bin: PathBuf, keep: bool) -> Result<Self, String> {
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let mut cluster = Self {
            bin,
            dir: PathBuf::new(),
            port: free_port()?,
            as_postgres: root,
            keep,
            settings: Vec::new(),
        };
        // The directory belongs to whoever runs the server.
        let made =
            cluster.output(Command::new("mktemp").args(["-d", "-t", "pgbus-chaos-XXXXXX"]))?;
        cluster.dir = PathBuf::from(made.trim());
        Ok(cluster)
    }

    /// A streaming standby of `primary` (which must be running): a base backup
    /// taken with `pg_basebackup -R`, so it starts in standby mode and follows
    /// the primary over a replication connection named `application_name`
    /// (what the primary's `synchronous_standby_names` refers to). Not started
    /// yet.
    pub(crate) fn create_standby(primary: &Self, application_name: &str) -> Result<Self, String> {
        if !primary.bin.join("pg_basebackup").is_file() {
            return Err(format!(
                "no `pg_basebackup` in {}; pass the PostgreSQL binaries with --pg-bin DIR",
                primary.bin.display()
            ));
        }
        let standby = Self::empty(primary.bin.clone(), primary.keep)?;
        let source = format!(
            "host=127.0.0.1 port={} user={SUPERUSER} application_name={application_name}",
            primary.port
        );
        standby.output(
            Command::new(standby.bin.join("pg_basebackup"))
                .arg("-D")
                .arg(standby.data())
                .args([
                    "-d",
                    &source,
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                    "--no-sync",
                ]),
        )?;
        // The primary's settings are not copied: `synchronous_standby_names`,
        // say, would make the promoted standby wait for a standby it lacks.
        Ok(standby)
    }

    /// Adds a server setting (`-c name=value` on every start). Values must not
    /// need quoting.
    pub(crate) fn set(&mut self, name: &str, value: &str) {
        self.settings
            .retain(|s| !s.starts_with(&format!("{name}=")));
        self.settings.push(format!("{name}={value}"));
    }

    /// The port it listens on, on 127.0.0.1.
    pub(crate) const fn port(&self) -> u16 {
        self.port
    }

    /// A URL for the cluster's `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", self.port)
    }

    /// Where the cluster lives.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps the directory when dropped (set when a check failed).
    pub(crate) const fn keep(&mut self) {
        self.keep = true;
    }

    /// Starts the server and waits until it accepts connections.
    pub(crate) fn start(&self) -> Result<(), String> {
        let mut options = String::new();
        let _ = write!(
            options,
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c fsync=off -c full_page_writes=off -c max_connections=300 \
             -c log_min_messages=warning",
            self.port,
            self.dir.display()
        );
        for setting in &self.settings {
            let _ = write!(options, " -c {setting}");
        }
        self.output(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.join("postgres.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
        )
        .map(drop)
    }

    /// Stops the server at once, as a crash would: no checkpoint, every backend
    /// gone; the next start recovers from the WAL.
    pub(crate) fn stop_immediately(&self) -> Result<(), String> {
        self.output(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "-w", "-t", "60", "stop"]),
        )
        .map(drop)
    }

    /// Ends recovery on a standby: it becomes a primary that accepts writes.
    /// Returns once promotion has completed (`pg_ctl promote -w`).
    pub(crate) fn promote(&self) -> Result<(), String> {
        self.output(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-t", "60", "promote"]),
        )
        .map(drop)
    }

    /// An immediate stop, then a start; how long the server was away.
    pub(crate) fn restart(&self) -> Result<Duration, String> {
        let began = Instant::now();
        self.stop_immediately()?;
        self.start()?;
        Ok(began.elapsed())
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs `command` (as `postgres` when we are root); its stdout, or an error
    /// with its output.
    fn output(&self, command: &mut Command) -> Result<String, String> {
        let mut command = if self.as_postgres {
            let mut runuser = Command::new("runuser");
            runuser
                .args(["-u", "postgres", "--"])
                .arg(command.get_program())
                .args(command.get_args());
            runuser
        } else {
            std::mem::replace(command, Command::new("true"))
        };
        let shown = format!("{command:?}");
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("could not run {shown}: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "{shown} failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.dir.as_os_str().is_empty() {
            return;
        }
        // Not running is fine: the stop fails and there is nothing to stop.
        let _ = self.stop_immediately();
        if self.keep {
            eprintln!("kept the cluster's directory: {}", self.dir.display());
        } else if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("could not remove {}: {error}", self.dir.display());
        }
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`, else
/// `pg_config --bindir`.
fn find_bin() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let output = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .map_err(|_| {
            "no PostgreSQL server binaries found (no /usr/lib/postgresql/*/bin/initdb, no pg_config); pass --pg-bin DIR".to_owned()
        })?;
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// A port nobody listens on now.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("could not find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("could not find a free port: {e}"))
}
