//! Strictness under racing workers: no key, workflow or queue ever has more
//! steps in progress than its limit, as counted by the step bodies
//! themselves and by a sampler reading the tables throughout, and every run
//! finishes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, FlowControl, StartOptions, Worker};

use super::{Job, job_key, limited};
use crate::pg::{TestDb, eventually};

/// Counts the bodies running at once per `(workflow, key)`, and the most
/// ever seen.
#[derive(Default)]
struct Tracker {
    now: Mutex<HashMap<(&'static str, String), usize>>,
    most: Mutex<HashMap<(&'static str, String), usize>>,
}

impl Tracker {
    async fn body(&self, workflow: &'static str, key: String) {
        let slot = (workflow, key);
        {
            let mut now = self.now.lock().unwrap();
            let running = now.entry(slot.clone()).or_default();
            *running += 1;
            let mut most = self.most.lock().unwrap();
            let seen = most.entry(slot.clone()).or_default();
            *seen = (*seen).max(*running);
        }
        // Work enough for the bodies of one key to overlap if the claim let them.
        tokio::time::sleep(Duration::from_millis(2)).await;
        *self.now.lock().unwrap().entry(slot).or_default() -= 1;
    }

    /// The most bodies of one key of `workflow` seen at once.
    fn most(&self, workflow: &str) -> usize {
        let most = self.most.lock().unwrap();
        most.iter()
            .filter(|((w, _), _)| *w == workflow)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0)
    }
}

/// A tracked body; its limit set by the wrapper. One step: a slot given
/// back between steps is the release tests' subject, this one's is volume.
struct KeyOne(Arc<Tracker>);

#[workflow(name = "strict.key_one", input = Job)]
impl KeyOne {
    #[step]
    async fn one(&self, cx: &mut StepCx<Job>) {
        self.0.body("strict.key_one", cx.input().key.clone()).await;
    }
}

struct KeyThree(Arc<Tracker>);

#[workflow(name = "strict.key_three", input = Job)]
impl KeyThree {
    #[step]
    async fn one(&self, cx: &mut StepCx<Job>) {
        self.0
            .body("strict.key_three", cx.input().key.clone())
            .await;
    }
}

limited!(
    LimitOne(KeyOne),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    },
    key: job_key,
);

limited!(
    LimitThree(KeyThree),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(3),
        ..FlowControl::NONE
    },
    key: job_key,
);

/// The most steps in progress at once per `(workflow, key)` in one snapshot
/// of the tables, over all workflows and keys: `(workflow, key, steps)`.
const BUSIEST_KEY: &str = "SELECT r.workflow, r.concurrency_key, count(*) \
     FROM {schema}.steps s JOIN {schema}.runs r ON r.id = s.run_id \
     WHERE s.status = 'in_progress' AND r.concurrency_key IS NOT NULL \
     GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 1";

/// Reads `sql` (one row of `(text, text, bigint)`, or none) until `stop`,
/// keeping the most each workflow reached. Its own connection: what an
/// operator's dashboard would see.
fn sample(
    db: Database,
    sql: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(HashMap<String, i64>, usize)> {
    tokio::spawn(async move {
        let client = db.pool().get().await.expect("a connection");
        let statement = client.prepare(&sql).await.expect("prepare");
        let mut most: HashMap<String, i64> = HashMap::new();
        let mut samples = 0;
        while !stop.load(Ordering::Relaxed) {
            for row in client.query(&statement, &[]).await.expect("sample") {
                let workflow: String = row.get(0);
                let steps: i64 = row.get(2);
                let seen = most.entry(workflow).or_default();
                *seen = (*seen).max(steps);
            }
            samples += 1;
            // A read every few milliseconds: often enough to see any excess
            // that lasts, without taking a core from the workers.
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        (most, samples)
    })
}

/// Runs `workers` until every run of the schema ended (at most `bound`),
/// then stops them.
async fn run_all(t: &TestDb, workers: Vec<Worker>, bound: Duration) -> bool {
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut handles = Vec::new();
    for worker in workers {
        let mut stop = stop_tx.subscribe();
        handles.push(tokio::spawn(async move {
            worker
                .run_until(async move {
                    let _ = stop.recv().await;
                })
                .await
        }));
    }
    let done = eventually(bound, || async {
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE status NOT IN ('finished', 'cancelled')",
            &[],
        )
        .await
            == 0
    })
    .await;
    let _ = stop_tx.send(());
    for handle in handles {
        handle.await.expect("a worker task").expect("a worker");
    }
    done
}

fn worker_on(db: &Database, tracker: &Arc<Tracker>) -> Worker {
    db.worker()
        .register(LimitOne(KeyOne(Arc::clone(tracker))))
        .register(LimitThree(KeyThree(Arc::clone(tracker))))
        .concurrency(8)
        .poll_interval(Duration::from_millis(20))
        .build()
        .expect("a worker")
}

/// Runs of `W` for `keys`: one per key, and `hot` more for each of the
/// first ten keys (the ones a limit holds back).
async fn start_keyed<W: Workflow<Input = Job>>(t: &TestDb, keys: &[String], hot: usize) -> usize {
    let mut starts: Vec<Job> = keys.iter().map(|k| Job::new(k.clone())).collect();
    for key in &keys[..10] {
        starts.extend(std::iter::repeat_n(Job::new(key.clone()), hot));
    }
    let count = starts.len();
    for chunk in starts.chunks(500) {
        t.client()
            .start_many::<W>(chunk.iter().map(|job| (job, StartOptions::new())))
            .await
            .expect("starts");
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_never_run_more_of_a_key_than_its_limit_and_every_run_finishes() {
    let t = TestDb::new().await;
    let tracker = Arc::new(Tracker::default());
    // 1,000 keys, half of each workflow; ten keys of each with many runs.
    let keys: Vec<String> = (0..1_000).map(|k| format!("k{k}")).collect();
    let runs = start_keyed::<LimitOne>(&t, &keys[..500], 8).await
        + start_keyed::<LimitThree>(&t, &keys[500..], 12).await;

    let workers = vec![
        worker_on(&t.db, &tracker),
        worker_on(&t.second_connection().await, &tracker),
        worker_on(&t.second_connection().await, &tracker),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(
        t.second_connection().await,
        t.sql(BUSIEST_KEY),
        Arc::clone(&stop),
    );
    let finished = run_all(&t, workers, Duration::from_mins(1)).await;
    stop.store(true, Ordering::Relaxed);
    let (sampled, samples) = sampler.await.expect("the sampler");
    assert!(
        finished,
        "every run finishes: {:?}",
        status_counts(&t).await
    );
    assert!(
        samples > 10,
        "the sampler read the tables throughout ({samples} reads)"
    );

    assert_eq!(
        tracker.most("strict.key_one"),
        1,
        "key_concurrency 1, counted by the bodies"
    );
    let three = tracker.most("strict.key_three");
    assert!(
        (2..=3).contains(&three),
        "key_concurrency 3 reached and never passed, counted by the bodies: {three}"
    );
    for (workflow, limit) in [("strict.key_one", 1), ("strict.key_three", 3)] {
        let seen = sampled.get(workflow).copied().unwrap_or(0);
        assert!(
            seen <= limit,
            "{workflow}: {seen} in progress for one key in one snapshot"
        );
    }
    let finished = t
        .count(
            "SELECT count(*) FROM {schema}.runs WHERE status = 'finished'",
            &[],
        )
        .await;
    assert_eq!(usize::try_from(finished).unwrap(), runs);
}

/// The schema's step rows by status, held or not, and run status: what a
/// test that timed out reports.
async fn status_counts(t: &TestDb) -> Vec<(String, i64)> {
    t.query(
        "SELECT s.status || CASE WHEN s.held_by IS NULL THEN '' ELSE ' held' END                 || ' / run ' || r.status, count(*)::bigint          FROM {schema}.steps s JOIN {schema}.runs r ON r.id = s.run_id          GROUP BY 1 ORDER BY 1",
        &[],
    )
    .await
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// One tracked step, all runs under one name (no key): limited as a whole.
struct Whole(Arc<Tracker>);

#[workflow(name = "strict.whole", input = Job)]
impl Whole {
    #[step]
    async fn one(&self, _cx: &mut StepCx<Job>) {
        self.0.body("strict.whole", String::new()).await;
    }
}

limited!(
    Capped(Whole),
    flow: FlowControl {
        concurrency: Some(3),
        ..FlowControl::NONE
    },
    key: |_| None,
);

/// One tracked step of an unlimited workflow, its runs on queue `narrow`.
struct Narrow(Arc<Tracker>);

#[workflow(name = "strict.narrow", input = Job)]
impl Narrow {
    #[step]
    async fn one(&self, _cx: &mut StepCx<Job>) {
        self.0.body("strict.narrow", String::new()).await;
    }
}

/// The most steps in progress at once per workflow in one snapshot, and
/// on queue `narrow`.
const BUSIEST_WORKFLOW: &str = "SELECT s.workflow, '', count(*) \
     FROM {schema}.steps s WHERE s.status = 'in_progress' GROUP BY 1 \
     UNION ALL \
     SELECT 'queue:narrow', '', count(*) \
     FROM {schema}.steps s WHERE s.status = 'in_progress' AND s.queue = 'narrow'";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_workflow_limit_and_a_queue_limit_hold_under_racing_workers() {
    const RUNS: usize = 150;
    let t = TestDb::new().await;
    let client = t.client();
    let tracker = Arc::new(Tracker::default());
    let jobs: Vec<Job> = (0..RUNS).map(|i| Job::new(format!("j{i}"))).collect();
    client
        .start_many::<Capped>(jobs.iter().map(|job| (job, StartOptions::new())))
        .await
        .expect("starts");
    client
        .start_many::<Narrow>(
            jobs.iter()
                .map(|job| (job, StartOptions::new().queue("narrow"))),
        )
        .await
        .expect("starts");

    let mut workers = Vec::new();
    for db in [
        t.db.clone(),
        t.second_connection().await,
        t.second_connection().await,
    ] {
        workers.push(
            db.worker()
                .register(Capped(Whole(Arc::clone(&tracker))))
                .register(Narrow(Arc::clone(&tracker)))
                .queue("default")
                .queue("narrow")
                .queue_concurrency("narrow", 2)
                .concurrency(8)
                .poll_interval(Duration::from_millis(20))
                .build()
                .expect("a worker"),
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(
        t.second_connection().await,
        t.sql(BUSIEST_WORKFLOW),
        Arc::clone(&stop),
    );
    let finished = run_all(&t, workers, Duration::from_mins(1)).await;
    stop.store(true, Ordering::Relaxed);
    let (sampled, samples) = sampler.await.expect("the sampler");
    assert!(
        finished,
        "every run finishes: {:?}",
        status_counts(&t).await
    );
    assert!(
        samples > 10,
        "the sampler read the tables throughout ({samples} reads)"
    );

    let whole = tracker.most("strict.whole");
    assert!(
        (2..=3).contains(&whole),
        "concurrency 3 reached, never passed: {whole}"
    );
    let narrow = tracker.most("strict.narrow");
    assert!(
        (1..=2).contains(&narrow),
        "queue limit 2 never passed: {narrow}"
    );
    let seen = |name: &str| sampled.get(name).copied().unwrap_or(0);
    assert!(seen("strict.whole") <= 3, "{sampled:?}");
    assert!(seen("queue:narrow") <= 2, "{sampled:?}");
    assert!(seen("strict.narrow") <= 2, "{sampled:?}");
}
