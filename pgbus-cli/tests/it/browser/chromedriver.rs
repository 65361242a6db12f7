//! A private chromedriver (Debian's `chromium-driver`) on a free loopback
//! port, starting headless Chromium for a WebDriver session. Dropping it
//! stops both, also when the test panics: chromedriver is asked to shut
//! down (it ends its sessions, which closes Chromium), then killed with
//! every process left in its process group, and waited for.

use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// Where Debian's `chromium-driver` package puts it.
const DEBIAN_BINARY: &str = "/usr/bin/chromedriver";

/// How long chromedriver may take to listen, and to exit once asked.
const WITHIN: Duration = Duration::from_secs(10);

/// The browser window's size in pixels; a screenshot holds its viewport (the
/// window less what headless Chromium keeps for its toolbars).
const WINDOW: (u32, u32) = (1280, 900);

/// A running chromedriver; its log and Chromium's profile sit in `dir`.
pub(crate) struct ChromeDriver {
    child: Child,
    dir: PathBuf,
    port: u16,
    chromium: PathBuf,
}

impl ChromeDriver {
    /// Starts chromedriver on a free port of 127.0.0.1 and waits until it
    /// listens.
    ///
    /// # Panics
    /// When chromedriver or Chromium is not installed (run `.ci/deps`), or
    /// chromedriver exits or does not listen within 10 s.
    pub(crate) fn start() -> Self {
        let driver = binary("chromedriver", DEBIAN_BINARY).expect(
            "chromedriver is not installed: run .ci/deps (or `apt-get install chromium-driver`)",
        );
        // Where `.ci/deps` found it: on the PATH, as `chromium` or `chromium-browser`.
        let chromium = binary("chromium", "/usr/bin/chromium")
            .or_else(|| binary("chromium-browser", "/usr/bin/chromium-browser"))
            .expect("Chromium is not installed: run .ci/deps (or `apt-get install chromium`)");
        let port = free_port().expect("a free port");
        let dir = std::env::temp_dir().join(format!(
            "pgbus-chromedriver-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(dir.join("profile")).expect("a profile directory");
        let spawned = Command::new(driver)
            .arg(format!("--port={port}"))
            .arg(format!(
                "--log-path={}",
                dir.join("chromedriver.log").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, which the Chromium it starts joins:
            // `Drop` can end them all, even if chromedriver no longer answers.
            .process_group(0)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&dir);
                panic!("could not start chromedriver: {error}");
            }
        };
        let mut started = Self {
            child,
            dir,
            port,
            chromium,
        };
        if let Err(error) = started.wait_ready() {
            panic!("{error}; its log: {}", started.log());
        }
        started
    }

    /// A WebDriver session: headless Chromium with the flags this machine's
    /// closed network needs and a window of [`WINDOW`].
    ///
    /// # Panics
    /// When chromedriver cannot start Chromium.
    pub(crate) async fn session(&self) -> Client {
        let (width, height) = WINDOW;
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", self.dir.join("profile").display()),
                ],
            },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!("an object")
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap_or_else(|error| panic!("start Chromium: {error}; its log: {}", self.log()))
    }

    /// chromedriver's log so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("chromedriver.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + WITHIN;
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "chromedriver exited with {status} before listening"
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("chromedriver did not listen within {WITHIN:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks chromedriver to end its sessions (closing Chromium) and exit:
    /// its `GET /shutdown`, in plain HTTP/1.1, bounded in time.
    fn ask_to_shut_down(&self) -> io::Result<()> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
        stream.set_write_timeout(Some(WITHIN))?;
        stream.set_read_timeout(Some(WITHIN))?;
        stream
            .write_all(b"GET /shutdown HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        let mut answer = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut answer)?;
        Ok(())
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        if self.ask_to_shut_down().is_ok() {
            let deadline = Instant::now() + WITHIN;
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Whatever is left of the group: chromedriver if it did not exit,
        // Chromium if it outlived it. The kernel keeps the group's id while
        // any member lives, so this reaches only what this guard started
        // (a group with none left answers "no such process").
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `name` on the PATH, else at `debian`, where Debian's package puts it.
fn binary(name: &str, debian: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .chain([PathBuf::from(debian)])
        .find(|p| p.is_file())
}

/// A loopback port nothing listens on now.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
