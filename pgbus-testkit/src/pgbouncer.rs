//! A private PgBouncer in transaction mode in front of the local server, for
//! tests that pgbus works behind a transaction-mode pooler. Started on a free loopback port with a configuration of its own and
//! stopped, its files removed, when the value is dropped, also when the test
//! panics.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `pgbouncer` package puts the binary.
const DEBIAN_BINARY: &str = "/usr/sbin/pgbouncer";

/// How long PgBouncer may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A running PgBouncer, `pool_mode = transaction`, `auth_type = trust`, every
/// database of the server behind it at `127.0.0.1:5432` (or `server_port`).
///
/// Runs as user `postgres` when this process is root (PgBouncer refuses to
/// run as root). Its log is at [`PgBouncer::log`].
///
/// ```no_run
/// let bouncer = pgbus_testkit::pgbouncer::PgBouncer::start(2, 5432)?;
/// let url = bouncer.url("test");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl PgBouncer {
    /// The `pgbouncer` binary: `$PGBOUNCER`, Debian's, or the first on `PATH`.
    #[must_use]
    pub fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("PGBOUNCER") {
            return Some(PathBuf::from(path));
        }
        if Path::new(DEBIAN_BINARY).exists() {
            return Some(PathBuf::from(DEBIAN_BINARY));
        }
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("pgbouncer"))
                .find(|path| path.exists())
        })
    }

    /// Starts one with `pool_size` server connections per database and user
    /// (`default_pool_size`: keep it small, 2 or 3, so clients really share
    /// server connections) in front of the server on `127.0.0.1:server_port`,
    /// and waits until it accepts connections.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when `pgbouncer` is not installed (on
    /// Debian: `apt-get install pgbouncer`), and what starting it failed with.
    pub fn start(pool_size: u32, server_port: u16) -> io::Result<Self> {
        let Some(binary) = Self::binary() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "pgbouncer is not installed (on Debian: apt-get install pgbouncer)",
            ));
        };
        let dir = std::env::temp_dir().join(format!("pgbus-pgbouncer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir)?;
        // From here on the directory is removed even if starting fails.
        let mut guard = DirGuard(Some(dir.clone()));
        let port = free_port()?;
        // Trust authentication still wants each user listed: the tests' own
        // (the test URL's, else the testkit's one rule), and the usual
        // superusers.
        let mut users = vec!["postgres".to_owned(), "root".to_owned()];
        let config = crate::pg::raw_config(&crate::pg::test_database_url());
        users.extend(config.ok().and_then(|c| c.get_user().map(str::to_owned)));
        users.sort();
        users.dedup();
        let userlist: Vec<String> = users
            .iter()
            .map(|user| format!("\"{user}\" \"\""))
            .collect();
        let userlist = userlist.join("\n") + "\n";
        std::fs::write(dir.join("userlist.txt"), userlist)?;
        let ini = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={server_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/userlist.txt\n\
             pool_mode = transaction\n\
             default_pool_size = {pool_size}\n\
             min_pool_size = 0\n\
             reserve_pool_size = 0\n\
             max_client_conn = 500\n\
             server_reset_query =\n\
             logfile = {dir}/pgbouncer.log\n",
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini)?;

        let mut command = Command::new(binary);
        command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
            let (uid, gid) = postgres_ids()?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
            command.uid(uid).gid(gid);
        }
        let child = command.spawn()?;
        guard.0 = None;
        let mut bouncer = Self { child, dir, port };
        bouncer.wait_ready()?;
        Ok(bouncer)
    }

    /// A URL for `database` through it, e.g. `postgres://127.0.0.1:6433/test`.
    #[must_use]
    pub fn url(&self, database: &str) -> String {
        format!("postgres://127.0.0.1:{}/{database}", self.port)
    }

    /// Its port on 127.0.0.1.
    #[must_use]
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// Its log file.
    #[must_use]
    pub fn log(&self) -> PathBuf {
        self.dir.join("pgbouncer.log")
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(self.log()).unwrap_or_default();
                return Err(io::Error::other(format!(
                    "pgbouncer exited with {status} before accepting connections: {log}"
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("pgbouncer did not listen within {READY_WITHIN:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes a directory when dropped, unless disarmed.
struct DirGuard(Option<PathBuf>);

impl Drop for DirGuard {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// The uid and gid of user `postgres`, from `/etc/passwd`.
fn postgres_ids() -> io::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&"postgres"))
        .and_then(|fields| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "pgbouncer refuses to run as root, and there is no user `postgres` to run it as",
            )
        })
}

/// Starts a [`PgBouncer`] for a test, or says why not: under `CI=true` a
/// missing `pgbouncer` fails the test; elsewhere the test is skipped with a
/// message (`None`).
///
/// # Panics
/// When PgBouncer cannot be started (and, under CI, when it is missing).
#[must_use]
#[allow(clippy::panic)]
pub fn for_test(pool_size: u32) -> Option<PgBouncer> {
    match PgBouncer::start(pool_size, 5432) {
        Ok(bouncer) => Some(bouncer),
        Err(error)
            if error.kind() == io::ErrorKind::NotFound
                && std::env::var("CI").map_or(true, |ci| ci != "true") =>
        {
            eprintln!("skipped: {error}");
            None
        }
        Err(error) => panic!("could not start pgbouncer: {error}"),
    }
}
