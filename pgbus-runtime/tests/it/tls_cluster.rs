//! A private PostgreSQL cluster for the TLS tests: a CA and a server
//! certificate made here (rcgen), so nothing depends on how the machine's
//! snakeoil certificate was made; `ssl = on`; a `pg_hba.conf` that lets in only
//! TLS connections with a SCRAM password over TCP. Runs as `postgres` when the
//! test runs as root (the server refuses root). Stopped and removed on drop,
//! panics included.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// The cluster superuser's password.
pub(crate) const PASSWORD: &str = "pgbus-test-secret";

/// A CA: its certificate (PEM) and what signs with it.
pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names) signed by this CA, and its key.
    pub(crate) fn issue(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "pgbus test server");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    }
}

pub(crate) struct TlsCluster {
    bin: PathBuf,
    dir: PathBuf,
    pub(crate) port: u16,
    as_postgres: bool,
    /// The CA that signed the server's certificate.
    pub(crate) ca: Ca,
}

impl TlsCluster {
    /// Creates and starts the cluster; its certificate names `localhost` only.
    pub(crate) fn start() -> Self {
        let bin = find_bin();
        let as_postgres = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cluster = Self {
            bin,
            dir: PathBuf::new(),
            port,
            as_postgres,
            ca: Ca::new("pgbus test CA"),
        };
        let made = cluster.run(Command::new("mktemp").args(["-d", "-t", "pgbus-tls-XXXXXX"]));
        cluster.dir = PathBuf::from(made.trim());
        let pwfile = cluster.dir.join("pwfile");
        cluster.write(&pwfile, PASSWORD, 0o644);
        cluster.run(
            Command::new(cluster.bin.join("initdb"))
                .arg("-D")
                .arg(cluster.dir.join("data"))
                .args(["-U", "postgres", "-E", "UTF8", "--no-sync"])
                .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
                .arg(format!("--pwfile={}", pwfile.display())),
        );
        cluster.write(
            &cluster.dir.join("data").join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 scram-sha-256\n\
             hostssl all all ::1/128 scram-sha-256\n",
            0o600,
        );
        let (cert, key) = cluster.ca.issue(&["localhost"]);
        cluster.write(&cluster.dir.join("server.crt"), &cert, 0o644);
        cluster.write(&cluster.dir.join("server.key"), &key, 0o600);
        let mut options = String::new();
        let _ = write!(
            options,
            "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={dir} \
             -c fsync=off -c ssl=on -c ssl_cert_file={dir}/server.crt \
             -c ssl_key_file={dir}/server.key -c log_min_messages=warning",
            dir = cluster.dir.display()
        );
        cluster.run(
            Command::new(cluster.bin.join("pg_ctl"))
                .arg("-D")
                .arg(cluster.dir.join("data"))
                .arg("-l")
                .arg(cluster.dir.join("postgres.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
        );
        cluster
    }

    /// The URL of the `postgres` database as the superuser, at `host`, with
    /// `query` (`sslmode=...&...`).
    pub(crate) fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@{host}:{}/postgres?{query}",
            self.port
        )
    }

    /// Writes a file in the cluster directory, readable as `mode` by the
    /// server's user.
    pub(crate) fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.join(name);
        self.write(&path, contents, 0o644);
        path
    }

    fn write(&self, path: &Path, contents: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(path, contents).expect("write a cluster file");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        if self.as_postgres {
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .arg(path)
                .status()
                .expect("chown");
            assert!(status.success(), "chown {}", path.display());
        }
    }

    /// Runs `command` (as `postgres` when root); its stdout.
    fn run(&self, command: &mut Command) -> String {
        self.output(command)
            .unwrap_or_else(|error| panic!("{error}"))
    }

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
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("could not run {command:?}: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "{command:?} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        if self.dir.as_os_str().is_empty() {
            return;
        }
        let _ = self.output(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-m", "immediate", "-w", "-t", "60", "stop"]),
        );
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("could not remove {}: {error}", self.dir.display());
        }
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`.
fn find_bin() -> PathBuf {
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
    versions
        .pop()
        .map(|(_, bin)| bin)
        .expect("PostgreSQL server binaries in /usr/lib/postgresql/*/bin")
}
