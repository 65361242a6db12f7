//! Supervisor mode: sets up the private cluster and the schema, starts the runs
//! and the worker processes, kills workers and restarts PostgreSQL on a random
//! schedule, waits until every run has ended (or the deadline passes), then checks
//! and prints the figures.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use pgbus_runtime::{Client, Clock, Database, RunId, Schema};

use crate::check::{self, Kill, Schedule};
use crate::cluster::Cluster;
use crate::options::Options;
use crate::workflow::{CREATE_EFFECTS, Order, Pipeline, SCHEMA, STEPS};

/// How often the supervisor looks at progress.
const TICK: Duration = Duration::from_millis(100);
/// How often it prints progress.
const REPORT_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn main(options: &Options) -> Result<bool, String> {
    let began = Instant::now();
    let deadline = began + options.deadline;
    let seed = options.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| u64::from(d.subsec_nanos()) ^ d.as_secs())
    });
    println!(
        "pgbus chaos: {} runs of {} steps, {} workers x {} bodies, {} kills, {} restarts, seed {seed}, deadline {} s",
        options.runs,
        STEPS.len(),
        options.workers,
        options.concurrency,
        options.kills,
        options.restarts,
        options.deadline.as_secs()
    );
    let mut cluster = Cluster::create(options.pg_bin.as_deref(), options.keep)?;
    cluster.start()?;
    println!(
        "private PostgreSQL cluster at {} ({})",
        cluster.url(),
        cluster.dir().display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?;
    let passed = runtime.block_on(supervise(options, &cluster, seed, began, deadline));
    if !matches!(passed, Ok(true)) {
        cluster.keep();
    }
    passed
}

/// Everything after the cluster is up.
async fn supervise(
    options: &Options,
    cluster: &Cluster,
    seed: u64,
    began: Instant,
    deadline: Instant,
) -> Result<bool, String> {
    let db = prepare(cluster).await?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let logs = Arc::new(WorkerLogs::create(cluster.dir().join("workers.log"))?);
    let mut fleet = Fleet {
        exe,
        url: cluster.url(),
        concurrency: options.concurrency,
        logs: Arc::clone(&logs),
        procs: Vec::new(),
        spawned: 0,
        unexpected_exits: 0,
    };
    for _ in 0..options.workers {
        fleet.spawn()?;
    }

    let mut random = SplitMix(seed);
    let total_steps = u64::from(options.runs) * STEPS.len() as u64;
    let mut schedule = Schedule::new(
        points(&mut random, options.kills, 0.05, 0.9, total_steps),
        points(&mut random, options.restarts, 0.15, 0.85, total_steps),
    );

    let started_at = Instant::now();
    let producer = tokio::spawn(produce(db.client(), options.runs, deadline));
    let mut last_report = Instant::now();
    let (mut completed, mut finished) = (0, 0);
    let timed_out = loop {
        tokio::time::sleep(TICK).await;
        if Instant::now() >= deadline {
            break true;
        }
        fleet.replace_exited()?;
        if let Ok(now) = progress(&db).await {
            (completed, finished) = now;
        }
        let at = format!("[{:6.1} s]", began.elapsed().as_secs_f64());
        act(
            &db,
            completed,
            &at,
            cluster,
            &mut fleet,
            &mut schedule,
            &mut random,
        )
        .await?;
        if last_report.elapsed() >= REPORT_EVERY {
            last_report = Instant::now();
            println!(
                "{at} {completed}/{total_steps} steps completed, {finished}/{} runs finished",
                options.runs
            );
        }
        if producer.is_finished() && finished >= u64::from(options.runs) {
            break false;
        }
    };
    let processing = started_at.elapsed();
    let started = if producer.is_finished() {
        producer.await.map_err(|e| e.to_string())??
    } else {
        producer.abort();
        BTreeSet::new()
    };
    tokio::task::block_in_place(|| fleet.stop_all());
    if timed_out {
        println!(
            "DEADLINE: {} s passed with {finished}/{} runs finished",
            options.deadline.as_secs(),
            options.runs
        );
    }
    let report = check::run(
        &db,
        options.runs,
        &started,
        &schedule,
        &check::Wall {
            total: began.elapsed(),
            processing,
        },
        &logs.counts(fleet.spawned, fleet.unexpected_exits),
    )
    .await?;
    report.print();
    let passed = report.passed() && !timed_out;
    if options.keep || !passed {
        println!("worker logs: {}", logs.path.display());
    }
    Ok(passed)
}

/// Connects, and creates the pgbus schema and the side table afresh.
pub(crate) async fn prepare(cluster: &Cluster) -> Result<Database, String> {
    let schema = Schema::new(SCHEMA).map_err(|e| e.to_string())?;
    let db = Database::connect_with(&cluster.url(), schema, Clock::Database)
        .await
        .map_err(|e| format!("cannot connect to the private cluster: {e}"))?;
    db.pool()
        .get()
        .await
        .map_err(|e| e.to_string())?
        .batch_execute("DROP SCHEMA IF EXISTS chaos CASCADE")
        .await
        .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    db.pool()
        .get()
        .await
        .map_err(|e| e.to_string())?
        .batch_execute(CREATE_EFFECTS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(db)
}

/// Kills a worker (and starts another) or restarts PostgreSQL when the
/// schedule says so, `completed` steps in.
async fn act(
    db: &Database,
    completed: u64,
    at: &str,
    cluster: &Cluster,
    fleet: &mut Fleet,
    schedule: &mut Schedule,
    random: &mut SplitMix,
) -> Result<(), String> {
    if schedule.next_kill().is_some_and(|due| completed >= due)
        && let Some(mut kill) = fleet.kill_one(random)?
    {
        // What it held stays in progress under its id until the sweep ends it.
        kill.held = held(db, &kill.label, &kill.worker_id).await;
        println!(
            "{at} SIGKILL {} ({}) holding {} attempts, {completed} steps done",
            kill.label,
            kill.worker_id,
            kill.held
                .map_or_else(|| "?".to_owned(), |held| held.to_string())
        );
        schedule.killed(kill);
        fleet.spawn()?;
    }
    if schedule.next_restart().is_some_and(|due| completed >= due) {
        let away = tokio::task::block_in_place(|| cluster.restart())?;
        println!(
            "{at} PostgreSQL restarted (immediate stop, then start): away {:.2} s, {completed} steps done",
            away.as_secs_f64()
        );
        schedule.restarted(away);
    }
    Ok(())
}

/// How many attempts a worker (killed just now) holds in progress; `None` when
/// the database cannot say. Counted once its backends are gone: a `COMMIT` it
/// sent just before it died may still land until then.
async fn held(db: &Database, label: &str, worker_id: &str) -> Option<i64> {
    let client = db.pool().get().await.ok()?;
    let name = application_name(label);
    for _ in 0..250 {
        let backends: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .ok()?
            .get(0);
        if backends == 0 {
            let row = client
                .query_one(
                    "SELECT count(*) FROM chaos.steps WHERE worker_id = $1 AND status = 'in_progress'",
                    &[&worker_id],
                )
                .await
                .ok()?;
            return Some(row.get(0));
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    None
}

/// The `application_name` of a worker's connections.
fn application_name(label: &str) -> String {
    format!("pgbus-chaos-{label}")
}

/// Starts every run, four at a time, each with an idempotency key so a start
/// retried after a lost reply never starts a second run. The run ids.
async fn produce(client: Client, runs: u32, deadline: Instant) -> Result<BTreeSet<i64>, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let client = client.clone();
        let next = Arc::clone(&next);
        tasks.spawn(async move {
            let mut ids = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Ok(n) = u32::try_from(n) else { break };
                if n >= runs {
                    break;
                }
                ids.push(start_one(&client, n, deadline).await?.0);
            }
            Ok::<_, String>(ids)
        });
    }
    let mut started = BTreeSet::new();
    while let Some(ids) = tasks.join_next().await {
        started.extend(ids.map_err(|e| e.to_string())??);
    }
    Ok(started)
}

async fn start_one(client: &Client, n: u32, deadline: Instant) -> Result<RunId, String> {
    let key = format!("chaos-{n}");
    loop {
        match client
            .start_idempotent::<Pipeline>(&Order { n }, &key)
            .await
        {
            Ok(started) => return Ok(started.run_id),
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(format!("could not start run {n}: {error}")),
        }
    }
}

/// Completed step rows and finished runs.
async fn progress(db: &Database) -> Result<(u64, u64), String> {
    let client = db.pool().get().await.map_err(|e| e.to_string())?;
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM chaos.steps WHERE status = 'completed'),
                    (SELECT count(*) FROM chaos.runs WHERE status = 'finished')",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    let steps: i64 = row.get(0);
    let runs: i64 = row.get(1);
    Ok((
        u64::try_from(steps).unwrap_or(0),
        u64::try_from(runs).unwrap_or(0),
    ))
}

/// `count` points spread over `[from, to]` of `total`: one at random in each of
/// `count` equal slices, so the events neither bunch up nor follow a pattern.
fn points(random: &mut SplitMix, count: u32, from: f64, to: f64, total: u64) -> Vec<u64> {
    let width = (to - from) / f64::from(count.max(1));
    (0..count)
        .map(|i| {
            let at = from + width * (f64::from(i) + random.unit());
            // At most `total`, and the product is non-negative: the cast is exact
            // enough for a schedule.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let point = (at * total as f64) as u64;
            point.min(total)
        })
        .collect()
}

/// A small, seedable pseudo-random generator (SplitMix64): the schedule and the
/// victims follow from the seed.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1_u64 << 53) as f64
    }

    /// A number in `[0, n)`.
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

/// One worker process.
struct Proc {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its pgbus worker id, once it said `ready`.
    id: Arc<Mutex<Option<String>>>,
}

/// The worker processes.
struct Fleet {
    exe: PathBuf,
    url: String,
    concurrency: u32,
    logs: Arc<WorkerLogs>,
    procs: Vec<Proc>,
    spawned: usize,
    unexpected_exits: usize,
}

impl Fleet {
    fn spawn(&mut self) -> Result<(), String> {
        self.spawned += 1;
        let label = format!("w{}", self.spawned);
        let mut child = Command::new(&self.exe)
            .args(["worker", "--schema", SCHEMA])
            .arg("--url")
            .arg(format!(
                "{}?application_name={}",
                self.url,
                application_name(&label)
            ))
            .args(["--concurrency", &self.concurrency.to_string()])
            .args(["--label", &label])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        let id = Arc::new(Mutex::new(None));
        if let Some(stdout) = child.stdout.take() {
            let id = Arc::clone(&id);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(worker_id) = line.strip_prefix("ready ") {
                        *id.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(worker_id.to_owned());
                    }
                }
            });
        }
        if let Some(stderr) = child.stderr.take() {
            let logs = Arc::clone(&self.logs);
            let label = label.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    logs.line(&label, &line);
                }
            });
        }
        self.procs.push(Proc {
            label,
            stdin: child.stdin.take(),
            child,
            id,
        });
        Ok(())
    }

    /// Kills a worker that is up (said `ready`) with SIGKILL, chosen at random.
    fn kill_one(&mut self, random: &mut SplitMix) -> Result<Option<Kill>, String> {
        let ready: Vec<usize> = (0..self.procs.len())
            .filter(|i| {
                self.procs[*i]
                    .id
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_some()
            })
            .collect();
        if ready.is_empty() {
            return Ok(None);
        }
        let mut victim = self.procs.remove(ready[random.below(ready.len())]);
        let at = SystemTime::now();
        // `Child::kill` sends SIGKILL on Unix.
        victim
            .child
            .kill()
            .map_err(|e| format!("cannot kill {}: {e}", victim.label))?;
        let _ = victim.child.wait();
        let worker_id = victim
            .id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        Ok(Some(Kill {
            label: victim.label,
            worker_id,
            at,
            held: None,
        }))
    }

    /// Replaces workers that exited on their own (they should not).
    fn replace_exited(&mut self) -> Result<(), String> {
        let mut exited = Vec::new();
        for (i, proc) in self.procs.iter_mut().enumerate() {
            if let Ok(Some(status)) = proc.child.try_wait() {
                println!("worker {} exited on its own: {status}", proc.label);
                exited.push(i);
            }
        }
        for i in exited.into_iter().rev() {
            self.procs.remove(i);
            self.unexpected_exits += 1;
            self.spawn()?;
        }
        Ok(())
    }

    /// Closes every worker's stdin (a graceful stop) and waits; kills those
    /// still running after 15 s.
    fn stop_all(&mut self) {
        for proc in &mut self.procs {
            drop(proc.stdin.take());
        }
        let until = Instant::now() + Duration::from_secs(15);
        for proc in &mut self.procs {
            loop {
                match proc.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Ok(None) => {
                        let _ = proc.child.kill();
                        let _ = proc.child.wait();
                        break;
                    }
                }
            }
        }
    }
}

/// The workers' stderr, in one file, with counts of warnings and errors.
pub(crate) struct WorkerLogs {
    path: PathBuf,
    file: Mutex<File>,
    warnings: AtomicUsize,
    errors: AtomicUsize,
    by_message: Mutex<HashMap<String, usize>>,
}

impl WorkerLogs {
    fn create(path: PathBuf) -> Result<Self, String> {
        let file =
            File::create(&path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(Self {
            path,
            file: Mutex::new(file),
            warnings: AtomicUsize::new(0),
            errors: AtomicUsize::new(0),
            by_message: Mutex::new(HashMap::new()),
        })
    }

    fn line(&self, label: &str, line: &str) {
        let _ = writeln!(
            self.file.lock().unwrap_or_else(PoisonError::into_inner),
            "{label}: {line}"
        );
        let level = if line.contains(" ERROR ") {
            &self.errors
        } else if line.contains(" WARN ") {
            &self.warnings
        } else {
            return;
        };
        level.fetch_add(1, Ordering::Relaxed);
        *self
            .by_message
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(message_of(line).to_owned())
            .or_default() += 1;
    }

    fn counts(&self, processes: usize, unexpected_exits: usize) -> check::LogCounts {
        let mut by_message: Vec<(String, usize)> = self
            .by_message
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(m, n)| (m.clone(), *n))
            .collect();
        by_message.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        check::LogCounts {
            processes,
            unexpected_exits,
            warnings: self.warnings.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            by_message,
        }
    }
}

/// The message of a `tracing` line, `<time> <LEVEL> <spans>: <target>: <message>
/// <field>=<value> ...`: after the target, up to the first field.
fn message_of(line: &str) -> &str {
    let start = ["pgbus_runtime", "pgbus_chaos", "deadpool", "tokio_postgres"]
        .iter()
        .filter_map(|target| line.find(target))
        .min()
        .and_then(|at| line[at..].find(": ").map(|colon| at + colon + 2));
    let Some(start) = start else {
        return line;
    };
    let rest = &line[start..];
    let end = rest
        .find('=')
        .and_then(|equals| rest[..equals].rfind(' '))
        .unwrap_or(rest.len());
    rest[..end].trim()
}
