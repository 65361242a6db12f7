//! Half-open mode: every connection a worker holds (its pool, its `LISTEN`
//! session, its heartbeat and sweep pool) stops carrying packets mid-run, as
//! when a proxy, a NAT or a load balancer in between forgets them, and the
//! worker must notice within its TCP keepalive / `tcp_user_timeout` bound,
//! reconnect through another path and finish every run.
//!
//! A userspace proxy on loopback cannot do this: its own socket keeps
//! acknowledging, so the kernel's keepalive never fails. Instead the server
//! listens on two loopback addresses; the workers' URL names 127.0.0.2 first
//! and 127.0.0.1 second, the client's only 127.0.0.1. Mid-run an `nft` rule
//! drops every packet to and from 127.0.0.2 on the server's port: the
//! workers' connections go half-open, and a new connection to 127.0.0.2 times
//! out (`connect_timeout`) after which tokio-postgres tries the second host,
//! as libpq does. The rule lives in a network namespace made for the run, so
//! it cannot touch any other traffic of the machine, and goes away with the
//! namespace.
//!
//! The outer process (root) makes the namespace (`ip netns add`), runs a copy of
//! itself inside it (`ip netns exec ... half-open --inside`) and deletes the
//! namespace when that ends, even on a panic.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::capture::{Captured, Logged};
use crate::cluster::Cluster;
use crate::options::OutageOptions;
use crate::outage::{self, Load, secs};
use crate::workflow::STEPS;

/// The TCP settings of the worker's URL, in libpq's units (seconds, and
/// milliseconds for `tcp_user_timeout`): the first keepalive probe after 1 s
/// idle, then one a second, the connection dropped after 2 unanswered; a send
/// not acknowledged within 2 s drops it too. pgbus sends the same values to
/// the server as its session's `tcp_keepalives_*` and `tcp_user_timeout`.
const TCP_SETTINGS: &str = "keepalives_idle=1&keepalives_interval=1&keepalives_retries=2&tcp_user_timeout=2000&connect_timeout=2";

/// The longest a half-open connection may live by those settings: 1 s idle
/// plus 2 probes 1 s apart; `tcp_user_timeout` ends a connection with
/// unacknowledged data at the first retransmission after 2 s, which on
/// loopback (200 ms doubling) is at 3.0 s.
const BOUND: Duration = Duration::from_secs(3);

/// What the check allows on top of [`BOUND`]: timer granularity, and a probe
/// or retransmission that was just sent when the drop began.
const MARGIN: Duration = Duration::from_secs(2);

/// The worker's connections are told apart by this `application_name`.
const WORKER_APP: &str = "pgbus-half-open-worker";

/// What `--client-side-only` adds to the worker's URL: the server's own
/// keepalives back at the system's defaults, undoing the session settings
/// pgbus sends by default, to show why it sends them: the backend of a dead
/// connection that was inside a transaction then keeps its row lock for as
/// long as the server's kernel keeps the socket (see RELIABILITY.md).
const CLIENT_SIDE_ONLY: &str = "-c tcp_keepalives_idle=0 -c tcp_keepalives_interval=0 \
     -c tcp_keepalives_count=0 -c tcp_user_timeout=0";

pub(crate) fn main(options: &OutageOptions, args: &[String]) -> Result<bool, String> {
    if options.inside {
        inside(options)
    } else {
        outside(args)
    }
}

/// Makes the namespace, runs the copy inside it, removes the namespace.
fn outside(args: &[String]) -> Result<bool, String> {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if !root {
        return Err("half-open needs root (it makes a network namespace and nft rules)".to_owned());
    }
    for (tool, package) in [("ip", "iproute2"), ("nft", "nftables")] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Err(format!(
                "half-open needs `{tool}`; install Debian's `{package}` package"
            ));
        }
    }
    let namespace = Namespace::create(&format!("pgbus-half-open-{}", std::process::id()))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let child = Command::new("ip")
        .args(["netns", "exec", &namespace.name])
        .arg(exe)
        .arg("half-open")
        .arg("--inside")
        .args(args)
        .spawn()
        .map_err(|e| format!("cannot run the copy inside the namespace: {e}"))?;
    let mut child = Reaped(child);
    let status = child
        .0
        .wait()
        .map_err(|e| format!("lost the copy inside the namespace: {e}"))?;
    match status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!("the copy inside the namespace failed ({status})")),
    }
}

/// A network namespace of our own with its loopback up; deleted when dropped.
struct Namespace {
    name: String,
}

impl Namespace {
    fn create(name: &str) -> Result<Self, String> {
        run(Command::new("ip").args(["netns", "add", name]))?;
        let namespace = Self {
            name: name.to_owned(),
        };
        run(Command::new("ip").args(["netns", "exec", name, "ip", "link", "set", "lo", "up"]))?;
        Ok(namespace)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(error) = run(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("could not delete network namespace {}: {error}", self.name);
        }
    }
}

/// A child process killed (if still running) and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// An `nft` table that drops every packet to or from [`DARK`] on one port
/// (both directions of a loopback connection pass the input hook); deleted when
/// dropped. Only ever made inside the namespace.
struct Blackhole;

/// The table's name.
const TABLE: &str = "pgbus_half_open";

/// The address whose traffic goes dark.
const DARK: &str = "127.0.0.2";

impl Blackhole {
    fn port(port: u16) -> Result<Self, String> {
        let script = format!(
            "add table inet {TABLE}\n\
             add chain inet {TABLE} input {{ type filter hook input priority 0; policy accept; }}\n\
             add rule inet {TABLE} input ip daddr {DARK} tcp dport {port} drop\n\
             add rule inet {TABLE} input ip saddr {DARK} tcp sport {port} drop\n"
        );
        let path = std::env::temp_dir().join(format!("pgbus-half-open-{}.nft", std::process::id()));
        std::fs::write(&path, script)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let made = run(Command::new("nft").arg("-f").arg(&path));
        let _ = std::fs::remove_file(&path);
        made?;
        Ok(Self)
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        let _ = run(Command::new("nft").args(["delete", "table", "inet", TABLE]));
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {shown}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Inside the namespace: the cluster, the load, the drop, the checks.
fn inside(options: &OutageOptions) -> Result<bool, String> {
    let began = Instant::now();
    let captured = outage::logging();
    println!(
        "pgbus half-open: {} runs of {} steps, {} workers x {} bodies, deadline {} s",
        options.runs,
        STEPS.len(),
        options.workers,
        options.concurrency,
        options.deadline.as_secs()
    );
    let mut cluster = Cluster::create(options.pg_bin.as_deref(), options.keep)?;
    cluster.set("listen_addresses", &format!("127.0.0.1,{DARK}"));
    cluster.start()?;
    let passed = outage::block_on(run_inside(options, &cluster, &captured, began));
    if !matches!(passed, Ok(true)) {
        cluster.keep();
    }
    passed
}

async fn run_inside(
    options: &OutageOptions,
    cluster: &Cluster,
    captured: &Captured,
    began: Instant,
) -> Result<bool, String> {
    let deadline = began + options.deadline;
    crate::supervisor::prepare(cluster).await?;
    let base = cluster.url();
    let port = cluster.port();
    // The workers try 127.0.0.2 first, then 127.0.0.1.
    let two_paths = format!("postgres://postgres@{DARK}:{port},127.0.0.1:{port}/postgres");
    let worker_url = if options.client_side_only {
        let undo: String = CLIENT_SIDE_ONLY.replace(' ', "%20").replace('=', "%3D");
        format!("{two_paths}?application_name={WORKER_APP}&{TCP_SETTINGS}&options={undo}")
    } else {
        format!("{two_paths}?application_name={WORKER_APP}&{TCP_SETTINGS}")
    };
    let client_url = format!("{base}?application_name=pgbus-half-open-client&{TCP_SETTINGS}");
    println!("workers on {worker_url}");
    let observer = outage::connect(&client_url, Duration::from_secs(10)).await?;
    let load = Load::start(&worker_url, &client_url, options).await?;
    load.wait_half_started(options.runs, deadline).await?;
    let steps_before = captured.completed_steps();

    let connections = established(port)?;
    if connections == 0 {
        return Err(format!("the workers hold no connections to {DARK}"));
    }
    let blackhole = Blackhole::port(port)?;
    let drop_at = Instant::now();
    println!(
        "{:>6.2} s dropping every packet to and from {DARK}:{port}: the workers' {connections} connections, after {steps_before} steps",
        drop_at.duration_since(began).as_secs_f64(),
    );
    // The client side of each connection must give up within the bound.
    let closed = wait_closed(port, drop_at + BOUND + MARGIN + Duration::from_secs(10)).await;
    let closed_after = closed.map(|at| at - drop_at);
    let ended = load.wait_ended(&observer, options.runs, deadline).await;
    let finished = Instant::now();
    if !ended {
        print_sessions(&observer).await;
    }
    let starts = load.stop_within_bound().await?;
    drop(blackhole);
    if !ended {
        println!("deadline passed before every run ended");
    }

    let within = closed_after.is_some_and(|d| d <= BOUND + MARGIN);
    let figures = figures(
        &Outcome {
            began,
            drop_at,
            finished,
            connections,
            closed_after,
            steps_before,
            retries: starts.retries,
        },
        captured,
    );
    let passed = outage::report(&observer, options.runs, &starts, captured, figures).await?;
    if !within {
        println!("result: a half-open connection outlived the keepalive bound");
    }
    Ok(ended && within && passed)
}

/// What happened, for the figures.
struct Outcome {
    began: Instant,
    drop_at: Instant,
    finished: Instant,
    connections: usize,
    closed_after: Option<Duration>,
    steps_before: usize,
    retries: usize,
}

/// The half-open run's own figures.
fn figures(outcome: &Outcome, captured: &Captured) -> Vec<(&'static str, String)> {
    let Outcome {
        began,
        drop_at,
        finished,
        connections,
        closed_after,
        steps_before,
        retries,
    } = *outcome;
    let since = |e: Option<Logged>| e.map_or_else(|| "-".to_owned(), |e| secs(e.at - drop_at));
    let mut figures = vec![
        (
            "tcp settings",
            format!(
                "{TCP_SETTINGS}; bound {}, allowed {}",
                secs(BOUND),
                secs(BOUND + MARGIN)
            ),
        ),
        (
            "half-open",
            format!(
                "{} connections of the workers (pool, LISTEN, upkeep); client side of all gone {} after the drop",
                connections,
                closed_after.map_or_else(|| "NEVER".to_owned(), secs)
            ),
        ),
        (
            "LISTEN lost",
            since(captured.first_after(drop_at, |e| {
                e.message.starts_with("notification connection lost")
            })),
        ),
        (
            "LISTEN back",
            since(
                captured.first_after(drop_at, |e| e.message == "notification connection is back"),
            ),
        ),
        (
            "time to resume",
            format!(
                "{} from the drop to the first step completed after it",
                since(captured.first_after(drop_at, Logged::is_completed_step))
            ),
        ),
    ];
    figures.extend(outage::across_figures(
        captured,
        "drop",
        drop_at,
        steps_before,
    ));
    figures.push((
        "wall time",
        format!(
            "{} ({} from the drop to the last run ended; {} client retries)",
            secs(finished - began),
            secs(finished - drop_at),
            retries
        ),
    ));
    figures
}

/// The server's sessions, for a run that did not end: what holds and what
/// waits.
async fn print_sessions(observer: &pgbus_runtime::Database) {
    let Ok(client) = observer.pool().get().await else {
        return;
    };
    let Ok(rows) = client
        .query(
            "SELECT application_name, client_port, state, coalesce(wait_event_type, ''),
                    coalesce(wait_event, ''),
                    coalesce(extract(epoch FROM now() - xact_start)::int, -1),
                    left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
             FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
               AND (state <> 'idle' OR xact_start IS NOT NULL)
             ORDER BY xact_start",
            &[],
        )
        .await
    else {
        return;
    };
    println!("sessions in a transaction or a statement:");
    for row in rows {
        println!(
            "  {} port {:?} {:?} wait {}/{} xact {} s: {}",
            row.get::<_, String>(0),
            row.get::<_, Option<i32>>(1),
            row.get::<_, Option<String>>(2),
            row.get::<_, String>(3),
            row.get::<_, String>(4),
            row.get::<_, i32>(5),
            row.get::<_, String>(6)
        );
    }
}

/// Waits until no socket of this namespace is connected to [`DARK`] on `port`
/// any more (the kernel gave up on them), polling `/proc/self/net/tcp`; when,
/// or `None` by `deadline`.
async fn wait_closed(port: u16, deadline: Instant) -> Option<Instant> {
    loop {
        if established(port).is_ok_and(|n| n == 0) {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many sockets are ESTABLISHED to [`DARK`] on `port` (the client sides).
fn established(port: u16) -> Result<usize, String> {
    let table = std::fs::read_to_string("/proc/self/net/tcp")
        .map_err(|e| format!("cannot read /proc/self/net/tcp: {e}"))?;
    // /proc/net/tcp writes an IPv4 address as the hex of its bytes read as a
    // native-endian u32 (0200007F for 127.0.0.2 on x86), `:`, the port in hex.
    let dark: std::net::Ipv4Addr = DARK.parse().map_err(|_| "bad DARK".to_owned())?;
    let remote = format!("{:08X}:{port:04X}", u32::from_ne_bytes(dark.octets()));
    Ok(table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let far = fields.nth(2).unwrap_or("");
            let state = fields.next().unwrap_or("");
            state == "01" && far == remote
        })
        .count())
}
