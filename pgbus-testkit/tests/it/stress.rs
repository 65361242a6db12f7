//! Many runs waiting on signals in the memory store, with signals sent from
//! several tasks while several others claim and run: no wake-up is lost (a
//! signal that lands between a claim and its park wakes the row at once), and
//! every signal is consumed exactly once.
//!
//! Each run also holds a `noise` signal its predicate turns down, slowly: every
//! claim spends a while in the gate. For every third run a chaser task sends
//! the signal as soon as the gate is entered, so that it lands between the claim
//! and the park; the others get theirs from senders that run on their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepOutcome, StepStatus};
use pgbus_testkit::TestEnv;
use tokio::task::JoinHandle;

const RUNS: usize = 10_000;
const SENDERS: usize = 4;
const RUNNERS: usize = 4;

/// Waits for a `go` that is not noise; outputs the payload it got. Tells the
/// chaser when the gate of a chased run looks at its noise.
struct Waiter {
    gated: std::sync::Mutex<std::sync::mpsc::Sender<u64>>,
}

fn chased(i: u64) -> bool {
    i.is_multiple_of(3)
}

#[workflow(name = "stress.waiter", input = u64)]
impl Waiter {
    fn not_noise(&self, cx: &StepCx<u64>, signal: &Signal) -> bool {
        if signal.payload == "noise" {
            if chased(*cx.input()) {
                let _ = self.gated.lock().unwrap().send(*cx.input());
                // Long enough for the chaser's signal to land before the park.
                std::thread::sleep(Duration::from_millis(1));
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
            return false;
        }
        true
    }

    #[step(wait_for(name = "go", matches = not_noise))]
    async fn wait(&self, cx: &mut StepCx<u64>) -> StepResult {
        let payload = cx.signal().expect("a signal").payload.clone();
        cx.output(&payload)?;
        Ok(Flow::Complete)
    }
}

/// What the runners saw.
#[derive(Default)]
struct Tally {
    finished: AtomicUsize,
    /// Attempts that parked as `waiting`.
    parked: AtomicUsize,
    /// Attempts that parked and were woken at once by a signal that came after
    /// their claim.
    woken_at_park: AtomicUsize,
}

/// Claims and runs due attempts until told to stop.
fn runner(env: Arc<TestEnv>, tally: Arc<Tally>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            let Some(record) = env.run_next().await else {
                tokio::task::yield_now().await;
                continue;
            };
            match record.outcome {
                Some(outcome) => {
                    assert_eq!(outcome, StepOutcome::Completed, "{record:?}");
                    assert_eq!(record.run_status, RunStatus::Finished);
                    tally.finished.fetch_add(1, Ordering::SeqCst);
                }
                None if record.status == StepStatus::Scheduled => {
                    tally.woken_at_park.fetch_add(1, Ordering::SeqCst);
                }
                None => {
                    assert_eq!(record.status, StepStatus::Waiting, "{record:?}");
                    tally.parked.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    })
}

/// Sends the signals of every `SENDERS`th run from `k` on that is not chased,
/// newest first: the runners claim oldest first, so the first runs get theirs
/// after parking, the last ones before their claim.
fn sender(env: Arc<TestEnv>, runs: Arc<Vec<RunId>>, k: usize) -> JoinHandle<()> {
    tokio::spawn(async move {
        for (i, run) in runs.iter().enumerate().skip(k).step_by(SENDERS).rev() {
            if chased(i as u64) {
                continue;
            }
            env.signal(*run, "go", &i).expect("the run is open");
            // Paced, so that the runners meet them half-way.
            if i % 2 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    })
}

/// Sends the signal of each chased run as soon as its gate is entered. A thread
/// of its own: a task woken from the gate would wait in the runner's own worker
/// until the gate is done.
fn chaser(
    env: Arc<TestEnv>,
    runs: Arc<Vec<RunId>>,
    gates: std::sync::mpsc::Receiver<u64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let chased_runs = (0..RUNS as u64).filter(|i| chased(*i)).count();
        let mut sent = std::collections::HashSet::new();
        while sent.len() < chased_runs {
            let i = gates.recv().expect("the env holds the sender");
            if sent.insert(i) {
                env.signal(runs[usize::try_from(i).unwrap()], "go", &i)
                    .expect("the run is open");
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn ten_thousand_waits_lose_no_wake_up() {
    let (gated, gates) = std::sync::mpsc::channel();
    let env = Arc::new(TestEnv::new().register(Waiter {
        gated: std::sync::Mutex::new(gated),
    }));
    let runs: Arc<Vec<RunId>> = Arc::new(
        (0..RUNS as u64)
            .map(|i| {
                let run = env.start::<Waiter>(&i).expect("start").run_id;
                env.signal(run, "go", "noise").expect("sent");
                run
            })
            .collect(),
    );

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let runners: Vec<JoinHandle<()>> = (0..RUNNERS)
        .map(|_| runner(Arc::clone(&env), Arc::clone(&tally), Arc::clone(&stop)))
        .collect();
    let chaser = chaser(Arc::clone(&env), Arc::clone(&runs), gates);
    let senders: Vec<JoinHandle<()>> = (0..SENDERS)
        .map(|k| sender(Arc::clone(&env), Arc::clone(&runs), k))
        .collect();
    for sender in senders {
        sender.await.expect("a sender");
    }

    // Every run ends without the clock moving: a lost wake-up leaves its row
    // waiting until its far due time, and the runners stop making progress.
    let mut progress = (0, Instant::now());
    while tally.finished.load(Ordering::SeqCst) < RUNS {
        let finished = tally.finished.load(Ordering::SeqCst);
        if finished > progress.0 {
            progress = (finished, Instant::now());
        }
        assert!(
            progress.1.elapsed() < Duration::from_secs(10),
            "only {finished} of {RUNS} runs finished, and none for 10 s: a wake-up was lost"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for runner in runners {
        runner.await.expect("a runner");
    }
    tokio::task::spawn_blocking(move || chaser.join())
        .await
        .expect("join")
        .expect("the chaser");
    assert!(env.run_until_idle().await.is_empty(), "nothing left to run");

    let never_parked = check_every_run(&env, &runs);
    eprintln!(
        "{RUNS} runs: {never_parked} took a signal sent before their claim; {} parks woken \
         later, {} woken at their park",
        tally.parked.load(Ordering::SeqCst),
        tally.woken_at_park.load(Ordering::SeqCst)
    );
    assert!(
        tally.woken_at_park.load(Ordering::SeqCst) > 0,
        "the race between a claim and its park was run"
    );
}

/// Every run finished in one attempt with its own signal, consumed once by that
/// attempt, its noise left. Returns how many never parked.
fn check_every_run(env: &TestEnv, runs: &[RunId]) -> usize {
    let mut never_parked = 0;
    for (i, run) in runs.iter().enumerate() {
        let view = env.run(*run).expect("run");
        assert_eq!(view.run.status, RunStatus::Finished, "run {i}");
        assert_eq!(view.steps.len(), 1, "one attempt: run {i}");
        let step = &view.steps[0];
        assert_eq!(step.output, Some(serde_json::json!(i)), "its own signal");
        let consumers: Vec<Option<i64>> = view.signals.iter().map(|g| g.consumed_by).collect();
        assert_eq!(
            consumers,
            [None, Some(step.id)],
            "the noise left, the signal consumed by its step: run {i}"
        );
        let consumed = view
            .events
            .iter()
            .filter(|e| e.event == "signal_consumed")
            .count();
        assert_eq!(consumed, 1, "consumed once: run {i}");
        if !view.events.iter().any(|e| e.event == "step_waiting") {
            never_parked += 1;
        }
    }
    never_parked
}
